"""kernel_trace.enclosing_ops: which aten ops enclose each launch, against a direct scan of every op."""

from __future__ import annotations

import random
from typing import Any

from kernelpilot.evaluation.audit.kernel_trace import enclosing_ops


def _scan(launch: dict[str, Any], ops_by_tid: dict[Any, list[dict[str, Any]]]) -> tuple[str, ...]:
    t0 = float(launch["ts"])
    t1 = t0 + float(launch["dur"])
    around = [op for op in ops_by_tid.get(launch["tid"], [])
              if float(op["ts"]) <= t0 and t1 <= float(op["ts"]) + float(op["dur"])]
    around.sort(key=lambda op: float(op["ts"]))
    return tuple(op["name"] for op in around)


def _op(name: str, tid: int, ts: float, dur: float) -> dict[str, Any]:
    return {"name": name, "tid": tid, "ts": ts, "dur": dur, "cat": "cpu_op", "ph": "X"}


def _launch(corr: int, tid: int, ts: float, dur: float) -> dict[str, Any]:
    return {"name": "cudaLaunchKernel", "tid": tid, "ts": ts, "dur": dur, "args": {"correlation": corr}}


def test_matches_a_scan_of_every_op_on_random_traces() -> None:
    rng = random.Random(7)
    for case in range(300):
        ops_by_tid: dict[Any, list[dict[str, Any]]] = {}
        launches = []
        for tid in range(rng.randint(1, 3)):
            # overlapping and nested ranges, equal starts and ends, zero durations, integer clock ticks (ties)
            ops_by_tid[tid] = [_op(f"aten::op{tid}_{i}", tid, rng.randint(0, 60), rng.choice([0, 1, 3, 10, 40]))
                               for i in range(rng.randint(0, 25))]
            launches += [_launch(100 * tid + i, tid, rng.randint(0, 70), rng.choice([0, 1, 2, 5]))
                         for i in range(rng.randint(0, 12))]
        launches.append(_launch(999, 9, 5, 1))  # a thread with no ops
        rng.shuffle(launches)
        found = enclosing_ops(launches, ops_by_tid)
        assert set(found) == {int(e["args"]["correlation"]) for e in launches}, case
        for e in launches:
            assert found[int(e["args"]["correlation"])] == _scan(e, ops_by_tid), (case, e)


def test_a_call_of_many_small_ops_stays_linear() -> None:
    """15k launches inside 45k ops nested three deep (a forward that formats a tensor, one item() per element):
    a scan of every op per launch made 675M comparisons here; the sweep answers at once."""
    ops, launches = [], []
    for i in range(15_000):
        t = i * 10.0
        ops += [_op("aten::item", 0, t, 8), _op("aten::_local_scalar_dense", 0, t + 1, 6),
                _op("aten::copy_", 0, t + 2, 4)]
        launches.append(_launch(i, 0, t + 3, 1))
    found = enclosing_ops(launches, {0: ops})
    assert found[0] == found[14_999] == ("aten::item", "aten::_local_scalar_dense", "aten::copy_")
    assert len(found) == 15_000
