"""`rules="kernelbench"`: PyTorch compute ops in ModelNew.forward are listed as warnings, every other
check stays as strict (pure classification, and the real CPU worker end to end)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation import EvalSettings, Evaluator
from kernelpilot.evaluation.audit import runtime as ra
from kernelpilot.verdict import Verdict
from worker_support import ask_worker

DATA = Path(__file__).parent / "data" / "cpu"


def test_settings_know_the_rules() -> None:
    assert EvalSettings().rules == "kernelpilot"
    assert EvalSettings.from_dict(EvalSettings(rules="kernelbench").to_dict()).rules == "kernelbench"
    with pytest.raises(KernelpilotError, match="scoring rules"):
        EvalSettings(rules="lenient")


@pytest.mark.parametrize("preset", ["kernelbench", "kernelbench-v0.1"])
def test_torch_ops_are_warnings_under_kernelbench_rules(preset: str) -> None:
    x = torch.randn(128, 128)
    ops, _ = ra.record_ops(lambda a: torch.softmax(a, dim=1) * 2, [x])
    strict = {(f.rule, f.severity) for f in ra.op_findings(ops, [], 4096)}
    assert strict == {("torch-compute-op", "reject")}
    kb = ra.op_findings(ops, [], 4096, rules=preset)
    assert {(f.rule, f.severity, f.evidence) for f in kb} == {
        ("torch-op-allowed", "warn", "aten._softmax"), ("torch-op-allowed", "warn", "aten.mul")}
    # memory ops stay silent under both rules
    ops, _ = ra.record_ops(lambda a: a.t().contiguous(), [x])
    assert ra.op_findings(ops, [], 4096, rules="kernelbench") == []


def test_kernel_rules_other_than_libraries_stay_strict_under_kernelbench() -> None:
    own = ["void scale_kernel<float>(float const*, float*, int)"]
    conv = ra.KernelTrace(kernels=[("void scale_kernel<float>(float const*, float*, int)", 7),
                                   ("sm90_xmma_fprop_implicit_gemm_f32f32", 7)], home_stream=7)
    assert [(f.rule, f.severity) for f in ra.kernel_findings(conv, own, [], rules="kernelbench")] == [
        ("library-kernel", "warn")]
    assert [(f.rule, f.severity) for f in ra.kernel_findings(conv, own, [])] == [("library-kernel", "reject")]
    assert [(f.rule, f.severity) for f in ra.kernel_findings(conv, own, [], rules="kernelbench-v0.1")] == [
        ("library-kernel", "warn")]
    side = ra.KernelTrace(kernels=[("void scale_kernel<float>(float const*, float*, int)", 13)], home_stream=7)
    assert [(f.rule, f.severity) for f in ra.kernel_findings(side, own, [], rules="kernelbench")] == [
        ("side-stream", "reject")]
    unused = ra.KernelTrace(kernels=[("void at::native::vectorized_elementwise_kernel<4, ...>", 7)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(unused, own, [], rules="kernelbench")] == ["no-custom-kernel"]


def _ask(ev: Evaluator, candidate: str) -> Verdict:
    return ask_worker(ev, DATA / candidate, DATA / "scaled_add.py")


@pytest.mark.slow
def test_worker_applies_kernelbench_rules(tmp_path: Path) -> None:
    settings = EvalSettings(device="cpu", confine=False, rules="kernelbench", start_timeout_s=300)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        ok = _ask(ev, "good.py")  # torch.add in forward: allowed, listed
        assert ok.status == "ok", ok.error
        assert [(f.rule, f.severity, f.evidence) for f in ok.findings] == [("torch-op-allowed", "warn", "aten.add")]
        cache = _ask(ev, "cached.py")  # the result replay is refused as ever
        assert cache.status == "rejected"
        assert "result-replay" in {f.rule for f in cache.findings if f.severity == "reject"}
        wrong = _ask(ev, "off_by_a_bit.py")
        assert wrong.status == "incorrect"
