"""Every ratio from the same minute (issue 51 items 1 and 2): a benchmark times eager, torch.compile and the candidate
interleaved in the same rounds, and the problem's shared baselines (the baseline service's measurement) give only
what does not drift: the problem's analysis and torch.compile's own check. torch.compile's output is put through
the candidates' check unchanged, and a failure is said in every verdict of the problem and counted in the report."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.correctness import compiled_check
from kernelpilot.evaluation.correctness.compare import Tolerance
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.timing import candidate as timing
from kernelpilot.evaluation.timing import interleaved as tm
from kernelpilot.verdict import Timing


class _Clock:
    """A fake clock: a call advances it by the implementation's cost, so every time measured is exact."""

    now = 0.0

    @classmethod
    def read(cls) -> float:
        return cls.now


class _Event:
    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = _Clock.now

    def elapsed_time(self, end: "_Event") -> float:
        return (end.t - self.t) * 1000.0


def _costing(ms: float, calls: list[str], name: str) -> Any:
    def fn(x: torch.Tensor) -> torch.Tensor:
        _Clock.now += ms / 1000.0
        calls.append(name)
        return x * 2
    return fn


def _problem_module() -> types.ModuleType:
    module = types.ModuleType("kp_test_problem")
    module.get_inputs = lambda: [torch.randn(16, 16)]  # type: ignore[attr-defined]
    module.get_init_inputs = lambda: []  # type: ignore[attr-defined]
    return module


def _benchmark(shared: dict[str, Any] | None) -> tuple[dict[str, Any], list[str], list[str]]:
    calls: list[str] = []
    pristine = tm.Pristine(_Clock.read, _Event, _Event.record, _Event.elapsed_time, lambda: None)
    worker = types.SimpleNamespace(device="cpu", pristine=pristine, ceilings=None, ceilings_note="none here",
                                   identities=types.SimpleNamespace(findings=lambda what: []), initial_state=None)
    state = types.SimpleNamespace(module=_problem_module(), reference=types.SimpleNamespace(
        model=_costing(2.0, calls, "eager")), reference_s=0.0, input_bytes=0, call_bytes=0, compile_note="")
    s = EvalSettings(device="cpu", rounds=3, samples_per_round=4, warmup=1, replay_checks=2, flush_bytes=1 << 20)
    perf, _sol, flags, findings = timing.benchmark(worker, state, _costing(0.5, calls, "candidate"),  # type: ignore[arg-type]
                                                   _costing(1.0, calls, "compiled"), s, Tolerance(1e-3, 1e-3, 1e-3),
                                                   shared)
    assert not findings
    return perf, flags, calls


def test_eager_torch_compile_and_the_candidate_are_timed_in_the_same_rounds() -> None:
    perf, _flags, calls = _benchmark(None)
    timed = calls[-36:]  # 3 rounds x 4 samples x 3 implementations, after the warm-up
    for r in range(3):
        rnd = timed[12 * r:12 * (r + 1)]
        assert sorted(set(rnd)) == ["candidate", "compiled", "eager"] and all(rnd.count(n) == 4 for n in set(rnd))
    assert timed[:6] == ["eager", "compiled", "candidate", "compiled", "candidate", "eager"]  # the order rotates
    assert perf["eager"]["median_ms"] == pytest.approx(2.0) and perf["compiled"]["median_ms"] == pytest.approx(1.0)
    assert perf["speedup_vs_compile"] == pytest.approx(2.0) and perf["speedup_vs_eager"] == pytest.approx(4.0)
    assert perf["baseline_source"] == "interleaved"


def test_shared_baselines_never_give_the_ratio_only_a_note_when_the_gpu_moved() -> None:
    def timing_of(ms: float) -> Timing:
        return Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, min_ms=ms, samples=20)

    stale = Baselines(eager=timing_of(4.0), compiled=timing_of(10.0),
                      problem_info={"bytes_moved": 123}, compiled_check="passed")
    perf, flags, _calls = _benchmark(stale.to_dict())
    # the ratio against torch.compile is the one timed beside the candidate, not the shared 10 ms of earlier
    assert perf["compiled"]["median_ms"] == pytest.approx(1.0) and perf["speedup_vs_compile"] == pytest.approx(2.0)
    assert perf["baseline_source"] == "interleaved"
    assert any("eager ran -50% against the baseline measured" in f and "beside the candidate" in f for f in flags)


def _state(tmp_path: Path) -> Any:
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "p.py").write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                                   "    def forward(self, x):\n        return torch.tanh(x) * 3.0\n\n"
                                   "def get_inputs():\n    return [torch.randn(64, 64)]\n\n"
                                   "def get_init_inputs():\n    return []\n")
    return Worker("cpu").problem_state(str(tmp_path / "p.py"), 42)


def test_torch_compile_s_output_goes_through_the_candidates_check_once(tmp_path: Path) -> None:
    state = _state(tmp_path)
    s = EvalSettings(device="cpu", confine=False, trials=3)
    tol = Tolerance(1e-4, 1e-4, 1e-5)
    right = state.reference.model
    assert compiled_check.check_compiled(right, state.reference, tol, s, "cpu") == "passed"
    wrong = compiled_check.check_compiled(lambda x: torch.tanh(x) * 3.0 + 1e-2, state.reference, tol, s, "cpu")
    assert wrong.startswith("failed: ") and "outside" in wrong
    assert "TF32" not in compiled_check.flag(wrong) and "torch.compile itself fails" in compiled_check.flag(wrong)
    assert compiled_check.flag("passed") == "" and compiled_check.flag("") == ""

    def broken(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("Inductor blew up")

    assert compiled_check.check_compiled(broken, state.reference, tol, s, "cpu").startswith("failed: it raised")
    # once per problem: the first answer (or the shared one) is kept on the problem's state
    assert compiled_check.once(state, broken, tol, s, "cpu", shared="failed: shared") == "failed: shared"
    assert compiled_check.once(state, right, tol, s, "cpu") == "failed: shared"


def test_the_report_counts_problems_where_torch_compile_fails_the_check() -> None:
    from kernelpilot.suite import metrics as m
    from kernelpilot.suite.store import Row

    def row(problem: str, check: str) -> Row:
        return Row(job_key=problem, problem=problem, level=2, sample=0, candidate=None, status="incorrect",
                   speedup_vs_eager=None, speedup_vs_compile=None, candidate_ms=None, seconds=1.0, gpu="",
                   flags=0, warnings=0, verdict={"correctness": {"compiled_check": check}})

    picks = [m.Pick("a.py", 2, row("a.py", "failed: 3 of 10 elements outside")),
             m.Pick("b.py", 2, row("b.py", "passed")), m.Pick("c.py", 2, row("c.py", ""))]
    assert m.compile_fails_check(picks[0].row) and not m.compile_fails_check(picks[1].row)  # type: ignore[arg-type]
    assert m.summarize(picks)["compile_fails_check"] == 1
