"""A training drop-in (its ModelNew defines backward) is timed as a training step uses it: forward then backward,
for eager, torch.compile and the candidate alike, with the same cotangents; the timed calls' gradients are checked
against eager's, so a backward that returns wrong gradients is caught while it is timed. (On the GPU, 2026-12-06, a
chunked head+loss timed forward against forward read 0.23x torch.compile: its forward carries the backward's
matmuls.)"""

from __future__ import annotations

import types
from typing import Any

import torch

from kernelpilot.evaluation.correctness.compare import Tolerance
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.timing import candidate as timing
from kernelpilot.evaluation.timing import interleaved as tm
from kernelpilot.evaluation.timing import training


class Model(torch.nn.Module):
    """A head and its loss: the reference."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(32, 8, generator=torch.Generator().manual_seed(1)) * 0.1)

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(hidden @ self.weight.t(), labels)


class ModelNew(Model):
    """The same loss with its gradients made in forward and returned by backward (the drop-in protocol); ``skew``
    scales the weight's gradient (a wrong backward)."""

    def __init__(self, skew: float = 1.0) -> None:
        super().__init__()
        self.skew = skew
        self.calls: list[str] = []

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.calls.append("forward")
        logits = hidden @ self.weight.t()
        p = torch.softmax(logits, dim=-1)
        p[torch.arange(labels.numel()), labels] -= 1
        d = p / labels.numel()
        self.saved = (d @ self.weight, d.t() @ hidden)
        return torch.nn.functional.cross_entropy(logits, labels)

    def backward(self, grads: tuple[torch.Tensor, ...], hidden: torch.Tensor, labels: torch.Tensor) -> Any:
        self.calls.append("backward")
        g = grads[0]
        return [g * self.saved[0], None], {"weight": g * self.saved[1] * self.skew}


def _inputs() -> list[torch.Tensor]:
    return [torch.randn(16, 8), torch.randint(0, 32, (16,))]


class TooBigToTrain(Model):
    """A reference whose backward would not fit: its forward under grad runs out of memory."""

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        return super().forward(hidden, labels)


def _benchmark(candidate: ModelNew, reference: Model | None = None, compiled_backward: str = "") -> tuple[
        dict[str, Any], dict[str, Any] | None, list[str], list[Any]]:
    reference = reference or Model()
    candidate.load_state_dict(reference.state_dict())
    clock = [0.0]

    class Event:
        def __init__(self, enable_timing: bool = True) -> None:
            self.t = 0.0

        def record(self) -> None:
            clock[0] += 1e-4
            self.t = clock[0]

        def elapsed_time(self, end: "Event") -> float:
            return (end.t - self.t) * 1000.0

    pristine = tm.Pristine(lambda: clock[0], Event, Event.record, Event.elapsed_time, lambda: None)
    worker = types.SimpleNamespace(device="cpu", pristine=pristine, ceilings=None, ceilings_note="none here",
                                   identities=types.SimpleNamespace(findings=lambda what: []), initial_state=None)
    module = types.ModuleType("kp_test_head")
    module.get_inputs = _inputs  # type: ignore[attr-defined]
    module.get_init_inputs = lambda: []  # type: ignore[attr-defined]
    state = types.SimpleNamespace(module=module, reference=types.SimpleNamespace(model=reference), reference_s=0.0,
                                  input_bytes=0, call_bytes=0, compile_note="", compiled_backward=compiled_backward)
    s = EvalSettings(device="cpu", rounds=2, samples_per_round=4, warmup=1, replay_checks=4, flush_bytes=1 << 16,
                     cuda_graphs=True)
    return timing.benchmark(worker, state, candidate, reference, s, Tolerance(1e-4, 1e-4, 1e-4),  # type: ignore[arg-type]
                            None, train=candidate)


def test_a_training_drop_in_is_timed_forward_and_backward_with_its_gradients_checked() -> None:
    candidate = ModelNew()
    perf, sol, flags, findings = _benchmark(candidate)
    assert findings == []
    assert perf["timed"] == "forward+backward" and perf["cuda_graphs"] is False  # autograd is never captured
    assert training.FLAG in flags and sol is None  # the analysis counts the forward: no speed of light
    assert candidate.calls.count("backward") == candidate.calls.count("forward") > 8  # each timed call is a step
    assert perf["compiled"] is not None and perf["speedup_vs_compile"] is not None


def test_a_torch_compile_whose_backward_failed_is_left_out_of_the_step_timing_and_says_why() -> None:
    why = "torch.compile's backward could not be built (RuntimeError: no)"
    perf, _sol, _flags, findings = _benchmark(ModelNew(), compiled_backward=why)
    assert findings == [] and perf["timed"] == "forward+backward"
    assert perf["compiled"] is None and perf["compiled_missing"] == why
    perf, _sol, _flags, _findings = _benchmark(ModelNew(), TooBigToTrain(), compiled_backward=why)
    assert perf["timed"] == "forward" and perf["compiled"] is not None  # its forward still times beside the rest


def test_a_backward_with_wrong_gradients_is_caught_while_it_is_timed() -> None:
    _perf, _sol, _flags, findings = _benchmark(ModelNew(skew=1.5))
    assert [f.rule for f in findings] == ["result-replay"]
    assert "outside" in findings[0].evidence and "a wrong backward" in findings[0].message


def test_a_step_that_does_not_fit_is_timed_forward_only_and_says_so() -> None:
    """A head+loss whose reference step needs the full logits and their gradient may not fit where the candidate's
    does: the candidate is never failed for that; the verdict times forwards and says why."""
    candidate = ModelNew()
    perf, _sol, flags, findings = _benchmark(candidate, TooBigToTrain())
    assert findings == [] and perf["timed"] == "forward" and perf["speedup_vs_eager"] is not None
    assert any(f.startswith("timed forward only: a training step") and "16.00 GiB" in f for f in flags)
    assert training.FLAG not in flags


def test_the_steps_return_the_same_gradients_as_autograd() -> None:
    reference = Model()
    candidate = ModelNew()
    candidate.load_state_dict(reference.state_dict())
    impls = training.training_impls({"eager": reference, "candidate": candidate}, reference, candidate, seed=3)
    x = _inputs()
    eager, mine = impls["eager"](*x), impls["candidate"](*x)
    assert len(eager) == len(mine) == 3  # the loss, the hidden states' gradient, the weight's (labels: none)
    for a, b in zip(eager, mine):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert reference.weight.grad is None  # nothing accumulates in the reference's parameters


def test_a_forward_only_timing_is_still_flagged_for_a_training_drop_in(tmp_path: Any) -> None:
    from kernelpilot.evaluation.static.training import FORWARD_ONLY, forward_only_flag
    from kernelpilot.verdict import Performance, Timing

    model = tmp_path / "model_new.py"
    model.write_text("class ModelNew:\n    def forward(self, x):\n        return x\n"
                     "    def backward(self, grads, x):\n        return [grads[0]], {}\n")
    t = Timing(median_ms=1.0, q1_ms=1.0, q3_ms=1.0, min_ms=1.0, samples=4)
    assert forward_only_flag(model, Performance(candidate=t)) == [FORWARD_ONLY]
    assert forward_only_flag(model, Performance(candidate=t, timed="forward+backward")) == []


def test_a_step_timed_verdict_says_so_wherever_it_is_read() -> None:
    from kernelpilot.evaluation.render import render_text, summary_line
    from kernelpilot.verdict import Correctness, Performance, Timing, Verdict

    t = Timing(median_ms=44.7, q1_ms=44.6, q3_ms=44.9, min_ms=44.5, samples=20)
    v = Verdict(status="ok", mode="benchmark", correctness=Correctness(passed=True),
                performance=Performance(candidate=t, eager=t, compiled=t, speedup_vs_eager=1.0, speedup_vs_compile=1.0,
                                        timed="forward+backward"))
    assert "a training step (forward+backward)" in summary_line(v)
    assert "each call forward+backward" in render_text(v)
    from kernelpilot.tui.verdict_view import _timing_section

    assert "Timing (per training step: forward and backward):" in str(_timing_section(v.performance))
    v.performance.timed = "forward"  # type: ignore[union-attr]
    assert "training step" not in summary_line(v) and "each call forward," in render_text(v)
