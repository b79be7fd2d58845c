"""Baselines kept on this machine across sessions, for the problem card to show at once.

``Evaluator.baselines`` measures a problem once per session; it also ``record``s the answer here, in one
SQLite file (``baselines.sqlite`` under ``platformdirs.user_cache_dir("kernelpilot")``;
``KERNELPILOT_BASELINES_CACHE`` names another file). The next session's card ``lookup``s it before its
own measurement ends and shows the figures labelled with their date. They are only ever shown: a
benchmark verdict's ratios come from eager and torch.compile timed beside the candidate in that session.

A row is found only for the same key: the problem file's bytes and the timing settings (``request_key``:
``compile_mode``, rounds, seed, the L2 flush...), and this machine's identity (``current_identity``: GPU
UUID, driver, torch, Triton, torch's CUDA and the GPU's clocks), all read without importing torch or
initialising CUDA, so a lookup takes milliseconds. A cache that cannot be read (corrupt, locked, another
user's) raises ``CacheUnavailable`` with what to do; writing to one only logs a warning, and a corrupt file
is set aside (``.corrupt-<time>``) and started again. Each write prunes the file to the newest ``KEEP_ROWS``
rows of the last ``KEEP_DAYS`` days.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.evaluation.baselines.identity import (
    current_identity,
    identity_mismatch,
    request_key,
)
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.settings import EvalSettings

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS baselines (
    key TEXT PRIMARY KEY, problem TEXT NOT NULL, gpu_uuid TEXT, data TEXT NOT NULL, created_at REAL NOT NULL);
"""
ENV = "KERNELPILOT_BASELINES_CACHE"
# The machine's cache keeps the newest rows: a row older than this, or beyond this count, is deleted when a
# new one is written (a driver or torch upgrade changes every key, so old rows would never match again)
KEEP_ROWS = 2000
KEEP_DAYS = 90.0
READ_TIMEOUT_S = 0.25  # a lookup waits this long for a writer's lock, then the card goes on without it
WRITE_TIMEOUT_S = 5.0


class CacheUnavailable(Exception):
    """The machine's baseline cache could not be read; the message says which file and why."""


class BaselineTable:
    """The ``baselines`` table of one SQLite file: Baselines as JSON by key, stamped with their time;
    ``get``/``put`` are safe from several threads. ``wal``: the journal a file shared with a run's verdicts
    uses (suite/baseline_store.py); the machine's cache keeps SQLite's default, so a reader opens it read-only."""

    def __init__(self, path: Path, *, timeout: float = 60.0, wal: bool = True) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=timeout)
        try:
            if wal:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            self._db.commit()
        except sqlite3.Error:
            self._db.close()
            raise

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM baselines WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def row(self, key: str) -> tuple[str, float] | None:
        """(problem, created_at) of the row with this key."""
        with self._lock:
            found = self._db.execute("SELECT problem, created_at FROM baselines WHERE key = ?", (key,)).fetchone()
        return (str(found[0]), float(found[1])) if found else None

    def put(self, key: str, problem: str, baselines: dict[str, Any], at: float | None = None) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO baselines (key, problem, gpu_uuid, data, created_at) "
                             "VALUES (?, ?, ?, ?, ?)", (key, problem, str(baselines.get("gpu_uuid", "")),
                                                        json.dumps(baselines), time.time() if at is None else at))
            self._db.commit()

    def prune(self, keep_rows: int, keep_days: float, now: float | None = None) -> int:
        """Delete the rows older than ``keep_days`` and all but the newest ``keep_rows``; returns how many went."""
        cutoff = (time.time() if now is None else now) - keep_days * 86400.0
        with self._lock:
            gone = self._db.execute("DELETE FROM baselines WHERE created_at < ?", (cutoff,)).rowcount
            gone += self._db.execute("DELETE FROM baselines WHERE key NOT IN (SELECT key FROM baselines "
                                     "ORDER BY created_at DESC LIMIT ?)", (max(int(keep_rows), 0),)).rowcount
            self._db.commit()
        return gone

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT problem, data FROM baselines ORDER BY created_at").fetchall()
        return [{"problem": p, **json.loads(d)} for p, d in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class CachedBaselines:
    """Baselines measured in an earlier session on this machine, and when."""

    baselines: Baselines
    measured_at: float  # time.time() when they were stored
    path: str = ""  # the cache file they came from

    def date(self) -> str:
        return time.strftime("%Y-%m-%d", time.localtime(self.measured_at))


def cache_file() -> Path:
    override = os.environ.get(ENV, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "baselines.sqlite"


def machine_key(problem: Path, settings: EvalSettings, identity: dict[str, Any]) -> str:
    """The problem's bytes and timing settings (the session memo's key) and this machine's identity."""
    named = {"gpu_uuid": str(identity.get("gpu_uuid") or "").removeprefix("GPU-").lower(),
             "clocks": dict(sorted((identity.get("clocks") or {}).items())),
             **{k: str(identity.get(k) or "") for k in ("driver", "torch", "triton", "cuda")}}
    digest = hashlib.sha256(request_key(Path(problem), settings).encode())
    digest.update(json.dumps(named, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def _identity(gpu: int | None, identity: dict[str, Any] | None) -> dict[str, Any]:
    if identity is not None:
        return identity
    return current_identity(gpu)


def lookup(problem: Path, settings: EvalSettings, gpu: int | None = None, *, identity: dict[str, Any] | None = None,
           path: Path | None = None) -> CachedBaselines | None:
    """This problem's baselines from an earlier session on this machine (None when there are none for
    this key). Raises CacheUnavailable when the file exists but cannot be read."""
    where = Path(path) if path is not None else cache_file()
    if not where.is_file():
        return None
    key = machine_key(problem, settings, _identity(gpu, identity))
    try:
        db = sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro", uri=True, timeout=READ_TIMEOUT_S)
        try:
            row = db.execute("SELECT data, created_at FROM baselines WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise CacheUnavailable(f"the machine's baseline cache {where} could not be read ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise CacheUnavailable(f"the machine's baseline cache {where} could not be read ({exc}); the next "
                               "measurement sets it aside and starts a new one") from None
    if row is None:
        return None
    try:
        return CachedBaselines(Baselines.from_dict(json.loads(row[0])), float(row[1]), str(where))
    except (ValueError, TypeError) as exc:
        raise CacheUnavailable(f"the machine's baseline cache {where} holds an unreadable row ({exc})") from None


def lookup_soon(problem: Path, settings: Callable[[], EvalSettings], gpu: int | None = None, *,
                path: Path | None = None) -> Future[CachedBaselines | None]:
    """``lookup`` started now on a daemon thread (the launcher starts it before the screen's modules load): its
    future holds the cached baselines, None, or the exception ``lookup`` (or ``settings``) raised."""
    future: Future[CachedBaselines | None] = Future()
    future.set_running_or_notify_cancel()

    def look() -> None:
        try:
            future.set_result(lookup(problem, settings(), gpu, path=path))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=look, name="kernelpilot-cached-baselines", daemon=True).start()
    return future


def record(problem: Path, settings: EvalSettings, gpu: int | None, baselines: Baselines, *,
           identity: dict[str, Any] | None = None, path: Path | None = None) -> Baselines:
    """Store ``baselines`` (measured in this session) for the next session's card; returns them. Never
    raises: a cache that cannot be written is logged and skipped."""
    if baselines.eager is None:
        return baselines
    where = Path(path) if path is not None else cache_file()
    try:
        now = _identity(gpu, identity)
        differs = identity_mismatch(baselines.identity(), now)
        if differs:  # the worker timed another GPU or software than this process names: a key would lie
            log.warning("baselines of %s not cached on this machine: measured on another setting (%s)",
                        problem, differs)
            return baselines
        key = machine_key(problem, settings, now)
        where.parent.mkdir(parents=True, exist_ok=True)
        _put(where, key, str(problem), baselines.to_dict())
    except (OSError, sqlite3.Error, ValueError) as exc:
        log.warning("baselines of %s not cached in %s: %s", problem, where, exc)
    return baselines


def _put(where: Path, key: str, problem: str, data: dict[str, Any]) -> None:
    for attempt in range(2):
        try:
            table = BaselineTable(where, timeout=WRITE_TIMEOUT_S, wal=False)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:  # not a database, or a malformed one: keep it aside, start again
            if attempt:
                raise
            aside = where.with_name(f"{where.name}.corrupt-{int(time.time())}")
            log.warning("the machine's baseline cache %s is unreadable (%s); moved to %s", where, exc, aside)
            where.replace(aside)
            continue
        try:
            table.put(key, problem, data)
            table.prune(KEEP_ROWS, KEEP_DAYS)
        finally:
            table.close()
        return
