"""benchmarks/suite_scaling.py's reading of a run: request windows per GPU from a real results.sqlite,
overlaps, what a planted hang cost, and the table's verdict on statuses that differ."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelpilot.suite.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import suite_scaling  # noqa: E402


def _run_dir(tmp_path: Path, rows: list[tuple[str, str, str, float | None, float | None, float]],
             created: dict[str, float] | None = None) -> Path:
    """A real suite database with verdict rows: (job, gpu, status, worker_start, worker_end, slot seconds);
    a row's verdict time is its worker_end, or `created[job]`."""
    created = created or {}
    store = Store(tmp_path / "run")
    for i, (job, gpu, status, start, end, slot) in enumerate(rows):
        store._db.execute(
            "INSERT INTO verdicts (job_key, problem, sample, status, gpu, worker_start, worker_end, verdict, "
            "created_at) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?)",
            (f"{job}#0", job, status, gpu, start, end, json.dumps({"phases": {"suite_slot": slot}}),
             (end if end is not None else created.get(job, float(i)))))
    store.close()
    return tmp_path / "run"


def test_windows_overlaps_and_planted_cost(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, [
        ("a", "gpu0", "ok", 0.0, 2.0, 2.0),
        ("hang_infinite_loop", "gpu0", "timeout", None, None, 15.0),  # killed: no window, placed by its verdict
        ("b", "gpu0", "ok", 18.0, 19.0, 1.0),
        ("c", "gpu1", "ok", 3.0, 5.0, 2.0),
        ("d", "gpu1", "ok", 5.5, 7.0, 1.5),
        ("e", "gpu1", "ok", 20.0, 21.0, 1.0),
        ("rejected_early", None, "rejected", None, None, 0.0),
    ], created={"hang_infinite_loop": 17.5, "rejected_early": 0.1})
    ws = suite_scaling.windows(run)
    assert [w["job"] for w in ws] == ["a", "hang_infinite_loop", "b", "c", "d", "e"]
    assert (ws[1]["start"], ws[1]["end"]) == (2.5, 17.5)
    assert suite_scaling.overlaps(ws) == []
    cost = suite_scaling.planted_cost(ws, "hang_infinite_loop")
    assert cost.startswith("slot 15.0 s; next on gpu0 +0.5 s after its slot; 2 requests served on other GPUs")
    assert suite_scaling.planted_cost(ws, "crash_illegal_address") == "did not reach a GPU"


def test_overlapping_requests_on_one_gpu_are_named(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, [("a", "gpu0", "ok", 0.0, 3.0, 3.0), ("b", "gpu0", "ok", 2.0, 4.0, 2.0),
                              ("c", "gpu1", "ok", 2.0, 4.0, 2.0)])
    assert suite_scaling.overlaps(suite_scaling.windows(run)) == ["a and b on gpu0"]


def test_table_fails_on_differing_statuses_and_reports_a_run_that_did_not_start() -> None:
    planted = {job: "slot 1.0 s" for job in suite_scaling.PLANTED}
    one = {"wall_s": 60.0, "per_min": 2.0, "statuses": {"x": "ok", "y": "timeout"}, "gpus": {"gpu0": 0.9},
           "overlaps": [], "planted": planted}
    two = dict(one, wall_s=32.0, per_min=3.75, gpus={"gpu0": 0.8, "gpu1": 0.85})
    text, ok = suite_scaling.table({"--gpus 0": one, "--gpus 0,1": two,
                                    "--ray auto (2 GPUs)": {"error": "not run: `import ray` failed"}},
                                   ["x", "y"], "test", 120)
    assert ok
    assert "| --gpus 0,1 | 32.0 | 3.75 | 1.88x | gpu0 80%, gpu1 85% | none |" in text
    assert "not run: `import ray` failed" in text
    bad = dict(two, statuses={"x": "ok", "y": "runtime_error"})
    text, ok = suite_scaling.table({"--gpus 0": one, "--gpus 0,1": bad}, ["x", "y"], "test", 120)
    assert not ok and "| y | - | timeout | runtime_error | NO |" in text
    expected = {"x": {"ok"}, "y": {"runtime_error"}}
    text, ok = suite_scaling.table({"--gpus 0": one}, ["x", "y"], "test", 120, expected)
    assert not ok and "| y | runtime_error | timeout | yes (unexpected) |" in text


def test_expected_statuses_come_from_the_corpus() -> None:
    want = suite_scaling.expected_statuses(["softmax", "hang_infinite_loop", "stale_memory"])
    assert want == {"softmax": {"ok"}, "hang_infinite_loop": {"timeout"}, "stale_memory": {"incorrect"}}
