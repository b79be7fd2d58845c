"""The suite report's arithmetic on known verdicts (expectations computed by hand in the comments)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kernelpilot.suite.discovery import Job, ProblemRef
from kernelpilot.suite.report import build_report, write_report
from kernelpilot.suite.store import Store
from kernelpilot.verdict import Performance, Verdict


def _job(key: str, level: int, sample: int = 0, candidate: bool = True) -> Job:
    return Job(ProblemRef(f"level{level}/{key}", Path(f"/p/{key}.py"), level, 1),
               Path(f"/s/{key}_{sample}.py") if candidate else None, sample)


def _v(status: str, eager: float | None = None, compiled: float | None = None, window: list[float] | None = None,
       flags: list[str] | None = None, phases: dict[str, float] | None = None) -> Verdict:
    perf = Performance(speedup_vs_eager=eager, speedup_vs_compile=compiled) if eager else None
    return Verdict(status=status, mode="benchmark", performance=perf,  # type: ignore[arg-type]
                   worker_window=window or [], flags=flags or [],
                   phases=phases or {})


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "run")
    s.set_meta(rules="kernelbench", mode="benchmark", source="fixture")
    plan = [_job("A", 1), _job("A", 1, 1), _job("B", 1), _job("C", 1), _job("C", 1, 1), _job("D", 1, candidate=False),
            _job("E", 2), _job("F", 2)]
    s.plan(plan)
    session = s.begin(["kernelpilot", "suite"])
    # A#0: its request took 20 s, its preparation 2 s more, and the slot held it 25 s; A#1: 20 s of 25 s
    verdicts = [_v("ok", 2.0, 1.5, [1010, 1030], phases={"worker_busy": 22.0, "suite_slot": 25.0}),
                _v("ok", 4.0, 3.0, [1040, 1060], phases={"suite_slot": 25.0}), _v("ok", 0.5, 0.4),
                _v("incorrect"), _v("ok", 1.2, 0.9), None, _v("ok", 8.0, 2.0, flags=["faster than the roofline"]),
                _v("build_error")]
    for job, verdict in zip(plan, verdicts, strict=True):
        assert s.add(job, verdict, status="missing" if verdict is None else None,
                     gpu="gpu0" if verdict and verdict.worker_window else None)
    assert not s.add(plan[0], verdicts[0])  # a second verdict for a finished job is never stored
    s._db.execute("UPDATE sessions SET started = 1000, ended = 1100 WHERE id = ?", (session,))
    yield s
    s.close()


def test_sample0_and_best_of_k(store: Store) -> None:
    r = build_report(store)
    assert r["rules"] == "kernelbench" and r["jobs"] == 8 and r["verdicts"] == 8
    l1 = r["views"]["sample0"]["level1"]
    # level 1, sample 0: A ok (2.0, 1.5), B ok (0.5, 0.4), C incorrect, D missing
    assert (l1["problems"], l1["passed"], l1["pass_rate"]) == (4, 2, 0.5)
    assert l1["faster_than_eager_rate"] == 0.25 and l1["faster_than_compile_rate"] == 0.25
    assert l1["geomean_vs_eager"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)
    assert l1["geomean_vs_compile"] == pytest.approx(math.sqrt(0.6))
    assert l1["fast_p_vs_eager"] == {"0": 0.5, "0.5": 0.25, "0.8": 0.25, "1": 0.25, "1.5": 0.25, "2": 0.0}
    assert l1["statuses"] == {"incorrect": 1, "missing": 1, "ok": 2}
    l2 = r["views"]["sample0"]["level2"]  # E ok (8.0, 2.0), F build error
    assert (l2["pass_rate"], l2["fast_p_vs_eager"]["2"], l2["geomean_vs_compile"]) == (0.5, 0.5, pytest.approx(2.0))
    overall = r["views"]["sample0"]["overall"]
    assert overall["problems"] == 6 and overall["pass_rate"] == 0.5
    assert overall["faster_than_compile_rate"] == pytest.approx(2 / 6)
    assert overall["fast_1_vs_compile"] == pytest.approx(2 / 6)
    assert overall["geomean_vs_eager"] == pytest.approx(2.0)  # (2.0 * 0.5 * 8.0) ** (1/3)
    assert overall["geomean_vs_compile"] == pytest.approx(1.2 ** (1 / 3))
    # best of k: A takes sample 1 (3.0 vs compile), C its passing sample 1 (1.2, 0.9)
    b1 = r["views"]["best_of_k"]["level1"]
    assert (b1["passed"], b1["faster_than_eager_rate"], b1["faster_than_compile_rate"]) == (3, 0.5, 0.25)
    assert b1["geomean_vs_eager"] == pytest.approx(2.4 ** (1 / 3))
    assert b1["geomean_vs_compile"] == pytest.approx(1.08 ** (1 / 3))


def test_throughput_and_flags(store: Store) -> None:
    t = build_report(store)["throughput"]
    assert t["wall_s"] == pytest.approx(100.0) and t["evaluated"] == 7  # D had no candidate
    assert t["candidates_per_minute"] == pytest.approx(4.2)
    g = t["gpus"]["gpu0"]  # busy 22 + 20 s while the slot held its two jobs 25 + 25 s; the run took 100 s
    assert (g["requests"], g["busy_s"], g["held_s"]) == (2, 42.0, 50.0)
    assert (g["busy_share"], g["busy_of_wall"]) == (pytest.approx(0.84), pytest.approx(0.42))
    sus = build_report(store)["suspicious"]
    assert [d["job"] for d in sus] == ["level2/E#0"] and "faster than the roofline" in sus[0]["reasons"]


def test_a_hung_job_counts_in_its_slot(tmp_path: Path) -> None:
    """A verdict killed by the watchdog has no worker window; it held the slot 17 s and kept its worker busy
    15 s (until the kill): both count, next to an ordinary request (busy 2 s of 3 s held)."""
    s = Store(tmp_path / "run")
    s.set_meta(rules="kernelpilot", mode="test", source="fixture")
    plan = [_job("ok", 1), _job("hang", 1), _job("rejected", 1)]
    s.plan(plan)
    s.begin(["kernelpilot", "suite"])
    s.add(plan[0], _v("ok", window=[1000, 1002], phases={"worker_busy": 2.0, "suite_slot": 3.0}), gpu="gpu0")
    s.add(plan[1], _v("timeout", phases={"verify": 15.0, "worker_busy": 15.0, "suite_slot": 17.0}), gpu="gpu0")
    s.add(plan[2], _v("rejected"), gpu=None)  # refused before the GPU: never held a slot
    g = build_report(s)["throughput"]["gpus"]["gpu0"]
    s.close()
    assert (g["requests"], g["busy_s"], g["held_s"]) == (2, 17.0, 20.0)
    assert g["busy_share"] == pytest.approx(0.85)


def test_written_report(store: Store) -> None:
    report, text = write_report(store.run_dir)
    assert "Scoring rules: **kernelbench**" in text and "## Best of k samples" in text
    assert "| level1 | 4 | 50.0% | 25.0% | 25.0% | 1.00x | 0.77x |" in text
    assert json.loads((store.run_dir / "report.json").read_text())["views"]["sample0"]["overall"]["problems"] == 6
    png = (store.run_dir / "speedup.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and "![speedup vs torch.compile](speedup.png)" in text


def test_where_the_slot_time_went_and_the_queue_over_time(tmp_path: Path) -> None:
    """Three jobs on one slot, taken in turn: the first ready at 0 s and taken at once (10 s held), the second and
    the third ready at 2 s and 4 s, taken at 10 s and 20 s (10 s held each); stored when the slot let them go."""
    s = Store(tmp_path / "run")
    s.set_meta(rules="kernelpilot", mode="benchmark", source="fixture")
    plan = [_job("a", 1), _job("b", 1), _job("c", 1)]
    s.plan(plan)
    s.begin(["kernelpilot", "suite"])
    phases = [{"verify": 3.0, "timing": 4.0, "worker_busy": 8.0, "suite_slot": 10.0, "suite_queue": 0.0},
              {"verify": 2.0, "timing": 5.0, "prepare": 1.0, "worker_busy": 9.0, "suite_slot": 10.0,
               "suite_queue": 8.0},
              {"verify": 2.0, "timing": 6.0, "worker_busy": 10.0, "suite_slot": 10.0, "suite_queue": 16.0}]
    for i, (job, ph) in enumerate(zip(plan, phases)):
        s.add(job, _v("ok", 1.0, 1.0, window=[0.0, 1.0], phases=ph), gpu="gpu0")
        s._db.execute("UPDATE verdicts SET created_at = ? WHERE job_key = ?", (1000.0 + 10 * (i + 1), job.key))
    report, text = write_report(s.run_dir)
    s.close()
    use = report["throughput"]["slot_seconds"]["gpu0"]
    assert use["verify"] == 7.0 and use["timing"] == 15.0 and use["prepare"] == 1.0
    assert use["worker, other"] == pytest.approx(4.0)  # 8 - 7, 9 - 8, 10 - 8
    assert use["slot held, worker idle"] == pytest.approx(3.0)  # 10 - 8, 10 - 9, 10 - 10
    assert sum(use.values()) == pytest.approx(30.0)
    # ready 0/2/4, taken 0/10/20: over 0..20 s in 12 slices; b waits 2..10, c waits 4..20
    depth = report["throughput"]["queue_depth"]
    assert len(depth) == 12 and depth[0]["from_s"] == 0.0
    assert max(d["max"] for d in depth) == 2.0 and depth[-1]["max"] == 1.0
    width = 20 / 12
    assert sum(d["mean"] * width for d in depth) == pytest.approx(8.0 + 16.0, abs=0.01)  # the waits add up
    assert "Where gpu0's slot time went (30.0 s held):" in text and "| timing | 15.0 | 50.0% |" in text
    assert "queue depth" in text
