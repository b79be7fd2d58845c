"""The baselines op on a real GPU: eager and torch.compile timed by the engine's timing, with the floor
at the measured ceilings (what the TUI's problem card shows before any candidate exists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings, Evaluator

pytestmark = pytest.mark.gpu

PROBLEM = Path(__file__).parents[1] / "data" / "problems" / "softmax_bf16.py"


def test_baselines_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.evaluation.baselines.machine_cache import lookup

    monkeypatch.setenv("KERNELPILOT_BASELINES_CACHE", str(tmp_path / "baselines.sqlite"))
    settings = EvalSettings(rounds=2, samples_per_round=10)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        b = ev.baselines(PROBLEM)
        assert b.eager is not None and b.eager.median_ms > 0 and b.eager.samples == 10
        assert b.compiled is not None and b.compiled.median_ms > 0, b.notes
        sol = b.speed_of_light
        assert sol is not None and sol.floor_ms and sol.bound in ("memory", "compute")
        assert b.problem_info.get("bytes_moved", 0) > 0  # the analysis the verdicts using these baselines take
        assert b.ceilings["copy_tbps"] > 0.5 and b.gpu
        assert 0 < (b.eager_pct_of_ceiling or 0) <= 105  # eager cannot beat the roofline by much
        assert b.triton and b.cuda and b.gpu_uuid and b.driver  # the identity the machine's cache is keyed on
        assert 0 < b.exclusive_s < b.seconds  # the timing held the GPU exclusively, the compile did not
        assert list(b.steps) == ["problem", "compile", "check", "pool", "timing", "ceiling"]  # where its seconds went
        assert sum(b.steps.values()) <= b.seconds + 0.01 and b.steps["timing"] >= b.exclusive_s - 0.002
        cached = lookup(PROBLEM, settings)  # kept on this machine for the next session's card, as this process names it
        assert cached is not None and cached.baselines.eager is not None
        assert cached.baselines.eager.median_ms == b.eager.median_ms
        assert ev.baselines(PROBLEM) is b  # measured once per session
        again = ev.baselines(PROBLEM, fresh=True)  # the warm worker keeps the compiled baseline
        assert again is not b and again.eager is not None and again.seconds < b.seconds


def test_a_benchmark_after_tests_reuses_the_warm_worker(tmp_path: Path) -> None:
    """Issue 27 item 4: the pairing loop's mode switch costs no worker start (the UI's evaluator: the
    example's settings and a standby builder), and the torch.compile baseline the session measured first is
    not compiled again."""
    import shutil

    from kernelpilot.config import load_config

    example = Path(__file__).parents[2] / "examples" / "rmsnorm"
    shutil.copytree(example, tmp_path / "rmsnorm")
    problem, candidate = tmp_path / "rmsnorm" / "problem.py", tmp_path / "rmsnorm" / "candidate"
    settings = EvalSettings.from_config(load_config(tmp_path / "rmsnorm", env={}))
    with Evaluator(settings, workdir=tmp_path / "work", standby_builder=True) as ev:
        ev.baselines(problem)
        starts = ev._client.starts
        first = ev.evaluate(problem, candidate, "test")
        assert first.status == "ok", first.summary
        (candidate / "model_new.py").write_text((candidate / "model_new.py").read_text() + "\n_EDIT = 1\n")
        bench = ev.evaluate(problem, candidate, "benchmark")
        assert bench.status == "ok", bench.summary
        assert ev._client.starts == starts, bench.phases  # no new worker
        assert "worker_wait" not in bench.phases and not bench.attempts, bench.phases
        assert bench.phases.get("compile_baseline", 0.0) < 1.0, bench.phases  # compiled once, at the baselines


def test_a_staged_benchmark_hands_on_its_test_verdict_and_verifies_once(tmp_path: Path) -> None:
    """Issue 49 item 3: a save's test verdict comes from its benchmark's own verification (protocol.TESTED),
    drawn before the timing; the benchmark verifies the candidate once, and its test verdict is the one a test
    request gives."""
    import shutil

    from kernelpilot.config import load_config

    example = Path(__file__).parents[2] / "examples" / "rmsnorm"
    shutil.copytree(example, tmp_path / "rmsnorm")
    problem, candidate = tmp_path / "rmsnorm" / "problem.py", tmp_path / "rmsnorm" / "candidate"
    settings = EvalSettings.from_config(load_config(tmp_path / "rmsnorm", env={}))
    with Evaluator(settings, workdir=tmp_path / "work", standby_builder=True) as ev:
        alone = ev.evaluate(problem, candidate, "test")
        tested = []
        bench = ev.evaluate(problem, candidate, "benchmark", on_tested=tested.append)
    assert bench.status == "ok" and bench.performance is not None, bench.summary
    assert len(tested) == 1
    staged = tested[0]
    assert staged.mode == "test" and staged.status == "ok" and staged.performance is None
    assert staged.correctness is not None and alone.correctness is not None
    assert [t.normalized_error for t in staged.correctness.trials] == [t.normalized_error
                                                                       for t in alone.correctness.trials]
    assert staged.seconds < bench.seconds
    assert bench.correctness is not None and len(bench.correctness.trials) == len(alone.correctness.trials)
