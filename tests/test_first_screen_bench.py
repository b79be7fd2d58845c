"""benchmarks/first_screen.py's split of the session's baselines: the worker's start comes from the evaluator's
record, else from its worker client (the baselines' request records none of its own)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _app(evaluator: object) -> SimpleNamespace:
    baselines = SimpleNamespace(seconds=6.3, compile_s=3.8, exclusive_s=0.43, steps={"problem": 1.1, "compile": 3.8})
    return SimpleNamespace(startup=SimpleNamespace(evaluator=evaluator),
                           card_facts=SimpleNamespace(baselines=baselines))


def test_the_worker_start_of_the_baselines_comes_from_the_client_when_the_evaluator_has_none() -> None:
    from first_screen import baseline_parts

    client = SimpleNamespace(launched_at=100.0, ready_at=107.5, start_steps={"import_torch": 3.2})
    parts = baseline_parts(_app(SimpleNamespace(last_worker_start_s=0.0, last_worker_start_steps={}, _client=client)))
    assert parts == {"worker_launched_s": None, "worker_start_s": 7.5, "worker_start_steps": {"import_torch": 3.2},
                     "measure_s": 6.3, "compile_s": 3.8, "exclusive_s": 0.43,
                     "measure_steps": {"problem": 1.1, "compile": 3.8}}
    recorded = SimpleNamespace(last_worker_start_s=2.25, last_worker_start_steps={"cuda": 0.1}, _client=client)
    assert baseline_parts(_app(recorded))["worker_start_s"] == 2.25  # the evaluator's own record first
    waiting = SimpleNamespace(launched_at=100.0, ready_at=0.0, start_steps={})  # not up yet: no start to report
    assert baseline_parts(_app(SimpleNamespace(_client=waiting)))["worker_start_s"] == 0.0


def test_the_worker_launch_is_placed_after_the_process_start_on_the_wall_clock() -> None:
    import time

    from first_screen import baseline_parts

    t0 = time.time() - 10.0  # the process started 10 s ago; the worker was launched 4 s ago (monotonic clock)
    client = SimpleNamespace(launched_at=time.monotonic() - 4.0, ready_at=time.monotonic(), start_steps={})
    parts = baseline_parts(_app(SimpleNamespace(last_worker_start_s=0.0, _client=client)), t0)
    assert abs(parts["worker_launched_s"] - 6.0) < 0.05
    assert abs(parts["worker_start_s"] - 4.0) < 0.05
