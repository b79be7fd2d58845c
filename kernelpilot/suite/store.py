"""The run's results: one SQLite file (``results.sqlite``) in the run folder, one row per verdict.

Each verdict is committed as it arrives (WAL journal, ``synchronous=FULL``), so Ctrl-C or kill -9
loses none that finished; ``job_key`` is unique, so a resumed run never stores one twice, and the
planner skips every job that has a row. Besides ``verdicts``: ``jobs`` (the plan: every job of the problems
given, written once when the run starts and never changed; the report counts a planned job without a verdict
as not run yet, and as a failure in its rates), ``meta`` (settings, rules, mode, sources, KernelBench commit)
and ``sessions`` (one row per start or resume: its wall time). Every session and verdict records the version of
kernelpilot's code that judged it (kernelpilot.code_version), so a run can say which versions it spans.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.suite.discovery import Job, ProblemRef

DB_NAME = "results.sqlite"
# statuses the suite adds to the verdict's: no candidate for the problem; not started (suite budget, stop)
SUITE_STATUSES = ("missing", "not_started")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_key TEXT PRIMARY KEY, problem TEXT NOT NULL, problem_path TEXT NOT NULL, level INTEGER,
    number INTEGER, sample INTEGER NOT NULL, candidate TEXT);
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, job_key TEXT NOT NULL UNIQUE, problem TEXT NOT NULL,
    level INTEGER, sample INTEGER NOT NULL, candidate TEXT, status TEXT NOT NULL, mode TEXT,
    speedup_vs_eager REAL, speedup_vs_compile REAL, candidate_ms REAL, eager_ms REAL, compiled_ms REAL,
    seconds REAL, gpu TEXT, worker_start REAL, worker_end REAL, flags INTEGER, warnings INTEGER,
    verdict TEXT, environment TEXT, session INTEGER, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, ended REAL, verdicts INTEGER DEFAULT 0,
    argv TEXT);
"""


@dataclass
class Row:
    """One stored verdict, as the report reads it."""

    job_key: str
    problem: str
    level: int | None
    sample: int
    candidate: str | None
    status: str
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    candidate_ms: float | None
    seconds: float | None
    gpu: str | None
    flags: int
    warnings: int
    verdict: dict[str, Any] | None
    created_at: float | None = None  # when it was stored: just after its GPU slot let it go


class Store:
    """The run's database; safe to use from several threads (one connection, one lock)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / DB_NAME
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        for table in ("verdicts", "sessions"):  # runs made before versions were recorded gain the column
            columns = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            if "code_version" not in columns:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN code_version TEXT")
        self.session: int | None = None
        self.code_version = ""  # the label of the code judging this session's verdicts (begin)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- meta and plan ---------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        with self._lock:
            return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def set_meta(self, **values: Any) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                 [(k, json.dumps(v, default=str)) for k, v in values.items()])

    @staticmethod
    def _job_row(j: Job) -> tuple[Any, ...]:
        return (j.key, j.problem.key, str(j.problem.path), j.problem.level, j.problem.number, j.sample,
                str(j.candidate) if j.candidate else None)

    def plan(self, jobs: list[Job]) -> None:
        """Record the planned jobs (kept from an earlier start: a resume adds none it already has)."""
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 [self._job_row(j) for j in jobs])

    def extend(self, jobs: list[Job]) -> list[Job]:
        """Plan the jobs the plan lacks, and give a planned job without a candidate the one now found (its
        ``missing`` verdict, about the file's absence, dropped); every other job and verdict kept. The jobs
        added or given a candidate."""
        changed: list[Job] = []
        with self._lock, self._db:
            stored = {r[0]: r[1] for r in self._db.execute("SELECT job_key, candidate FROM jobs")}
            for j in jobs:
                if j.key not in stored:
                    self._db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?)", self._job_row(j))
                    changed.append(j)
                elif stored[j.key] is None and j.candidate is not None:
                    self._db.execute("UPDATE jobs SET candidate = ? WHERE job_key = ?", (str(j.candidate), j.key))
                    self._db.execute("DELETE FROM verdicts WHERE job_key = ? AND status = 'missing'", (j.key,))
                    changed.append(j)
        return changed

    def planned(self) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute("SELECT job_key, problem, problem_path, level, number, sample, candidate FROM jobs "
                                   "ORDER BY rowid")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur]

    def planned_jobs(self) -> list[Job]:
        """The stored plan as jobs, in plan order: what ``--resume`` runs (empty before the plan was stored)."""
        return [Job(ProblemRef(j["problem"], Path(j["problem_path"]), j["level"], j["number"]),
                    Path(j["candidate"]) if j["candidate"] else None, j["sample"]) for j in self.planned()]

    def finished(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT job_key FROM verdicts")}

    # ---- verdicts --------------------------------------------------------------------------------
    def add(self, job: Job, verdict: Any | None, status: str | None = None, gpu: str | None = None) -> bool:
        """Store one finished job (``verdict`` a Verdict, or None with a suite ``status``); False if stored already."""
        v = verdict.to_dict() if verdict is not None else None
        perf = (v or {}).get("performance") or {}

        def ms(name: str) -> float | None:
            t = perf.get(name) or {}
            return t.get("median_ms")

        window = (v or {}).get("worker_window") or [None, None]
        findings = (v or {}).get("findings") or []
        row = (job.key, job.problem.key, job.problem.level, job.sample, str(job.candidate) if job.candidate else None,
               status or (v or {}).get("status") or "runtime_error", (v or {}).get("mode"),
               perf.get("speedup_vs_eager"), perf.get("speedup_vs_compile"), ms("candidate"), ms("eager"),
               ms("compiled"),
               (v or {}).get("seconds"), gpu, window[0], window[1], len((v or {}).get("flags") or []),
               sum(1 for f in findings if f.get("severity") == "warn"),
               json.dumps(v) if v is not None else None, json.dumps((v or {}).get("environment")) if v else None,
               self.session, time.time(), self.code_version or None)
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO verdicts (job_key, problem, level, sample, candidate, status, mode, "
                "speedup_vs_eager, speedup_vs_compile, candidate_ms, eager_ms, compiled_ms, seconds, gpu, "
                "worker_start, worker_end, flags, warnings, verdict, environment, session, created_at, code_version)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
            if cur.rowcount and self.session is not None:
                self._db.execute("UPDATE sessions SET verdicts = verdicts + 1 WHERE id = ?", (self.session,))
            return bool(cur.rowcount)

    def rows(self) -> list[Row]:
        with self._lock:
            cur = self._db.execute(
                "SELECT job_key, problem, level, sample, candidate, status, speedup_vs_eager, speedup_vs_compile,"
                " candidate_ms, seconds, gpu, flags, warnings, verdict, created_at FROM verdicts ORDER BY id")
            out = []
            for r in cur:
                out.append(Row(*r[:13], verdict=json.loads(r[13]) if r[13] else None, created_at=r[14]))
            return out

    # ---- sessions --------------------------------------------------------------------------------
    def begin(self, argv: list[str], code_version: str = "") -> int:
        """A start or resume of the run; ``code_version``: the label of the code that judges its verdicts."""
        with self._lock:
            cur = self._db.execute("INSERT INTO sessions (started, argv, code_version) VALUES (?, ?, ?)",
                                   (time.time(), json.dumps(argv), code_version or None))
            self.session = int(cur.lastrowid or 0)
            self.code_version = code_version
            return self.session

    def code_versions(self) -> dict[str, int]:
        """The code versions that judged this run's verdicts, with how many each ("unrecorded": before versions
        were recorded)."""
        with self._lock:
            cur = self._db.execute("SELECT COALESCE(code_version, 'unrecorded'), COUNT(*) FROM verdicts "
                                   "GROUP BY 1 ORDER BY MIN(id)")
            return {str(version): int(count) for version, count in cur}

    def end(self) -> None:
        if self.session is None:
            return
        with self._lock:
            self._db.execute("UPDATE sessions SET ended = ? WHERE id = ?", (time.time(), self.session))

    def sessions(self) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute("SELECT id, started, ended, verdicts, (SELECT MAX(created_at) FROM verdicts WHERE "
                                  "session = sessions.id) AS last_verdict FROM sessions ORDER BY id")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur]
