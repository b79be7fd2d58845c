"""A suite slot's spare worker: a candidate that crashes or hangs its worker costs its own evaluation,
not a worker start charged to the next candidate (real worker processes on the CPU)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings, Evaluator
from kernelpilot.verdict import Verdict
from worker_support import ask_worker

DATA = Path(__file__).parent / "data" / "cpu"
PROBLEM = DATA / "scaled_add.py"


def _ask(ev: Evaluator, candidate: str) -> Verdict:
    return ask_worker(ev, DATA / candidate, PROBLEM)


def _ready_spare(ev: Evaluator) -> int:
    """The spare's pid once it has come up (its ready message read here, as a long-idle spare's would be)."""
    spare = ev._spare
    assert spare is not None and spare.alive(), "no spare worker is running"
    spare.wait_ready(300)
    return spare.proc.pid


@pytest.mark.slow
def test_spare_takes_over_after_a_crash_and_a_hang(tmp_path: Path) -> None:
    settings = EvalSettings(device="cpu", confine=False, allowed_libraries=["add"], start_timeout_s=300,
                            test_timeout_s=120, call_floor_s=1.0, first_call_s=2.0)
    with Evaluator(settings, workdir=tmp_path / "work", spare_worker=True) as ev:
        assert _ask(ev, "good.py").status == "ok"
        first = ev._client.proc.pid
        spare = _ready_spare(ev)
        assert spare != first and ev._client.log_path != ev._spare.log_path

        crash = _ask(ev, "segfault.py")
        assert crash.status == "runtime_error" and "SIGSEGV" in crash.error
        after = _ask(ev, "good.py")
        assert after.status == "ok", after.error
        assert ev._client.proc.pid == spare  # the spare took over: no worker start for this candidate
        assert "worker_wait" not in after.phases, after.phases
        spare = _ready_spare(ev)  # and a new spare started behind it

        t0 = time.monotonic()
        hang = _ask(ev, "hangs.py")
        assert hang.status == "timeout" and time.monotonic() - t0 < 20
        # the worker was executing the hung request until the kill: that time counts as its busy time
        assert hang.phases["worker_busy"] == pytest.approx(sum(
            t for p, t in hang.phases.items() if p not in ("request", "worker_busy")), abs=0.01)
        assert hang.phases["worker_busy"] > 2.0
        t0 = time.monotonic()
        assert _ask(ev, "good.py").status == "ok"
        assert ev._client.proc.pid == spare
        assert time.monotonic() - t0 < 10  # a warm worker's evaluation, not a cold start
        pids = (ev._client.proc.pid, ev._spare.proc.pid)
    assert all(_gone(pid) for pid in pids)  # closing the evaluator stops the spare too


@pytest.mark.slow
def test_a_spare_taken_long_after_it_came_up_reports_its_start_not_its_age(tmp_path: Path) -> None:
    import select

    settings = EvalSettings(device="cpu", confine=False, allowed_libraries=["add"], start_timeout_s=300,
                            test_timeout_s=120)
    with Evaluator(settings, workdir=tmp_path / "work", spare_worker=True) as ev:
        assert _ask(ev, "good.py").status == "ok"
        spare = ev._spare
        assert spare is not None and spare.pending_ready
        # up (its ready message waiting in the pipe, unread), then idle for a while before it is taken
        assert select.select([spare._from_worker], [], [], 300)[0], "the spare did not come up"
        up = time.monotonic() - spare.launched_at
        time.sleep(3.0)
        assert _ask(ev, "segfault.py").status == "runtime_error"
        after = _ask(ev, "good.py")
        assert ev._client is spare and after.status == "ok", after.error
        assert 0 < after.phases["worker_start"] <= up + 0.5, (after.phases, up)  # not its age (up + 3 s and more)
        assert after.phases["worker_wait"] == 0.0, after.phases


def test_no_spare_unless_asked(tmp_path: Path) -> None:
    settings = EvalSettings(device="cpu", confine=False, allowed_libraries=["add"], start_timeout_s=300)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        assert _ask(ev, "good.py").status == "ok"
        assert ev._spare is None
    with Evaluator(settings, workdir=tmp_path / "cold", keep_warm=False, spare_worker=True) as ev:
        assert ev.spare_worker is False  # a spare only makes sense beside a warm worker


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    import os

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child: reap it if it is a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            return True
        time.sleep(0.1)
    return False
