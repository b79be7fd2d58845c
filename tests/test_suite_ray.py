"""The Ray pool on a real local Ray cluster with fake GPU resources: one actor per GPU, build-mode work."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings
from kernelpilot.suite.discovery import discover_jobs, discover_problems
from kernelpilot.suite.runner import run_jobs
from kernelpilot.suite.store import Store

ray = pytest.importorskip("ray")
DATA = Path(__file__).parent / "data" / "suite"


@pytest.mark.slow
def test_ray_actors_per_gpu_build_the_suite(tmp_path: Path) -> None:
    from kernelpilot.suite.ray_pool import RayPool

    (tmp_path / "sol").mkdir()
    shutil.copy(DATA / "solutions" / "1_scaled_add.py", tmp_path / "sol" / "1_scaled_add.py")
    # a pure PyTorch rewrite: it compiles nothing, so it goes to the actors' quick concurrency group
    rewrite = (DATA / "problems" / "2_tiny_softmax.py").read_text().replace("class Model(", "class ModelNew(")
    (tmp_path / "sol" / "2_tiny_softmax.py").write_text(rewrite)
    (tmp_path / "sol" / "3_no_solution.py").write_text("import threading\n")  # the static policy refuses it
    jobs = discover_jobs(discover_problems([DATA / "problems"]), tmp_path / "sol")
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        pool = RayPool(EvalSettings(device="cpu", confine=False), "auto", tmp_path / "work", build_workers=1)
        assert len(pool.actors) == 2  # one per (fake) GPU of the cluster
        store = Store(tmp_path / "run")
        store.plan(jobs)
        assert run_jobs(store, pool, jobs, "build") == 3
        pool.close()
    finally:
        ray.shutdown()
    rows = {r.problem: r for r in store.rows()}
    assert rows["1_scaled_add"].status == "ok" and rows["2_tiny_softmax"].status == "ok", \
        [(r.problem, r.verdict and r.verdict["error"]) for r in rows.values()]
    assert rows["3_no_solution"].status in ("rejected", "build_error")
    assert all(r.verdict and r.verdict["mode"] == "build" for r in rows.values())
    # the actors evaluated copies of the files they were sent, in their own work folders
    assert all(r.verdict and str(tmp_path / "work") in r.verdict["candidate"] for r in rows.values())
    store.close()
