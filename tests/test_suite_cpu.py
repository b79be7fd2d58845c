"""The suite on the CPU: the local pool with several fake GPUs (CPU workers), and a run killed with SIGKILL
then resumed (no verdict lost, none twice, none re-evaluated)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings
from kernelpilot.suite.discovery import discover_jobs, discover_problems
from kernelpilot.suite.pool import LocalPool, job_roots
from kernelpilot.suite.runner import run_jobs
from kernelpilot.suite.store import Store

DATA = Path(__file__).parent / "data" / "suite"
ROOT = Path(__file__).resolve().parents[1]


def _suite(tmp: Path, copies: int) -> tuple[Path, Path]:
    """``copies`` scaled-add problems with the same (passing under KernelBench's rules) solution."""
    problems, solutions = tmp / "problems", tmp / "solutions"
    problems.mkdir()
    solutions.mkdir()
    for i in range(copies):
        shutil.copy(DATA / "problems" / "1_scaled_add.py", problems / f"{i + 1}_scaled_add.py")
        shutil.copy(DATA / "solutions" / "1_scaled_add.py", solutions / f"{i + 1}_scaled_add.py")
    return problems, solutions


@pytest.mark.slow
def test_fake_gpus_never_overlap_on_a_slot(tmp_path: Path) -> None:
    problems, solutions = _suite(tmp_path, 4)
    jobs = discover_jobs(discover_problems([problems]), solutions)
    settings = EvalSettings(device="cpu", confine=False, rules="kernelbench", start_timeout_s=300, test_timeout_s=120)
    store = Store(tmp_path / "run")
    store.plan(jobs)
    store.begin(["test"])
    roots = job_roots([j.problem.path for j in jobs] + [j.candidate for j in jobs])
    assert roots == [problems.resolve(), solutions.resolve()]
    pool = LocalPool(settings, [0, 1], tmp_path / "run" / "work", build_workers=2, roots=roots)
    assert all(ev._client is not None for ev in pool.evaluators)  # both workers start before any job
    try:
        assert run_jobs(store, pool, jobs, "test") == 4
        # every problem and solution was open to each worker from its start: no restart per directory
        assert [ev._client.starts for ev in pool.evaluators] == [1, 1]
    finally:
        pool.close()
    rows = store.rows()
    assert sorted(r.status for r in rows) == ["ok"] * 4, [r.verdict and r.verdict["error"] for r in rows]
    assert {s.name for s in pool.stats} == {"gpu0", "gpu1"} and sum(s.served for s in pool.stats) == 4
    for s in pool.stats:  # one request at a time on a slot: its worker's windows never overlap
        spans = sorted(s.windows)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert {r.gpu for r in rows} <= {"gpu0", "gpu1"}
    assert all(r.verdict and {"suite_build", "suite_slot", "worker_busy"} <= set(r.verdict["phases"]) for r in rows)
    for r in rows:  # each problem was loaded while its candidate built: that time is a phase of its own
        assert 0 < r.verdict["phases"]["prepare"] <= r.verdict["phases"]["worker_busy"], r.verdict["phases"]
    assert run_jobs(store, pool, jobs, "test") == 0  # everything finished: nothing submitted again
    store.close()


@pytest.mark.slow
def test_killed_run_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    problems, solutions = _suite(tmp_path, 4)
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "kernelpilot", "suite", str(problems), "--solutions", str(solutions), "--out",
            str(run),
            "--mode", "test", "--rules", "kernelbench", "--device", "cpu", "--gpus", "0", "--build-workers", "1",
            "--jsonl"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    db = run / "results.sqlite"
    deadline = time.monotonic() + 240
    first: list[tuple[str, float]] = []
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    first = con.execute("SELECT job_key, created_at FROM verdicts ORDER BY id").fetchall()
            except sqlite3.OperationalError:  # the file exists a moment before its tables do: look again
                first = []
            if first:
                break
        time.sleep(0.2)
    assert first, "no verdict was stored before the deadline"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started, without a chance to clean up
    proc.wait()
    with sqlite3.connect(db) as con:
        before = dict(con.execute("SELECT job_key, created_at FROM verdicts").fetchall())
    assert 1 <= len(before) < 4, before
    out = subprocess.run([sys.executable, "-m", "kernelpilot", "suite", "--resume", str(run), "--jsonl"], env=env,
                         capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert events[0] == {**events[0], "event": "suite_started", "total": 4, "already_done": len(before)}
    assert len([e for e in events if e["event"] == "verdict"]) == 4 - len(before)
    with sqlite3.connect(db) as con:
        after = dict(con.execute("SELECT job_key, created_at FROM verdicts").fetchall())
        count = con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
        sessions = con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    assert count == 4 and len(after) == 4 and sessions == 2
    assert {k: after[k] for k in before} == before  # the finished verdicts were kept, not re-evaluated
    assert set(after.values()) and (run / "report.md").is_file()


def test_a_free_slot_takes_the_problem_it_judged_last_first() -> None:
    """ProblemQueue: the oldest job of the slot's last problem, else the oldest; None (stop) in order."""
    import threading

    from kernelpilot.suite.pool import ProblemQueue

    a, b = Path("/p/a.py"), Path("/p/b.py")
    q = ProblemQueue()
    for item in [(a, 1), (b, 2), (a, 3), (b, 4), None]:
        q.put(item)
    assert q.get() == (a, 1)
    assert q.get(prefer=a) == (a, 3)
    assert q.get(prefer=a) == (b, 2)  # none of a left: the oldest
    assert q.get(prefer=b) == (b, 4)
    assert q.get(prefer=b) is None
    got: list = []
    t = threading.Thread(target=lambda: got.append(q.get(prefer=a)))
    t.start()
    q.put((b, 5))  # a waiting slot wakes for any job
    t.join(timeout=5)
    assert got == [(b, 5)]


def test_a_candidate_that_compiles_nothing_is_not_queued_behind_builds(tmp_path: Path) -> None:
    """Pure PyTorch candidates take a lane of their own: with every build thread busy (a long CUDA build), one
    still goes through its build step (policy, nothing to compile) at once; one that compiles waits its turn."""
    import threading

    from kernelpilot.suite.pool import compiles_nothing

    problems, solutions = _suite(tmp_path, 1)
    rewrite = solutions / "2_scaled_add.py"
    rewrite.write_text((problems / "1_scaled_add.py").read_text().replace("class Model(", "class ModelNew("))
    compiled = solutions / "1_scaled_add.py"
    assert compiles_nothing(rewrite) and not compiles_nothing(compiled)
    assert not compiles_nothing(tmp_path / "missing.py")
    settings = EvalSettings(device="cpu", confine=False, rules="kernelbench")
    pool = LocalPool(settings, [0], tmp_path / "work", build_workers=1, warm=False)
    release = threading.Event()
    try:
        pool._builders.submit(release.wait, 120)  # the one build thread is taken by a long build
        waiting = pool.submit(problems / "1_scaled_add.py", compiled, "build")
        quick = pool.submit(problems / "1_scaled_add.py", rewrite, "build").result(timeout=60).verdict
        assert quick.status == "ok" and not waiting.done()
    finally:
        release.set()
        pool.close(cancel=True)
