"""The run's baselines: eager and torch.compile times per problem and GPU, kept in the run's SQLite file.

A table of its own (``baselines``) in ``results.sqlite``, beside the verdicts: one row per measured
(problem, settings) key with the Baselines as JSON, stamped with the GPU's UUID, driver, torch and
clocks. ``kernelpilot suite --resume`` reuses a row only where that identity matches the GPU it runs
on now (baseline_service.identity_mismatch decides); otherwise the problem is measured again and its
verdicts say so. Written as each baseline arrives, like the verdicts.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from kernelpilot.suite.store import DB_NAME

SCHEMA = """
CREATE TABLE IF NOT EXISTS baselines (
    key TEXT PRIMARY KEY, problem TEXT NOT NULL, gpu_uuid TEXT, data TEXT NOT NULL, created_at REAL NOT NULL);
"""


class BaselineStore:
    """``get``/``put`` for baseline_service.BaselineService, safe from its worker threads."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / DB_NAME
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._db.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM baselines WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, problem: str, baselines: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO baselines (key, problem, gpu_uuid, data, created_at) "
                             "VALUES (?, ?, ?, ?, ?)",
                             (key, problem, str(baselines.get("gpu_uuid", "")), json.dumps(baselines), time.time()))
            self._db.commit()

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT problem, data FROM baselines ORDER BY created_at").fetchall()
        return [{"problem": p, **json.loads(d)} for p, d in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
