"""torch.compile's run of a matmul is the cuBLAS call alone: its c0 (Inductor origin, libraries declared) has no
kernel of its own and is not refused for it; a PyTorch rewrite that declares nothing still is."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.evaluation.settings import EvalSettings

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

def get_inputs():
    return [torch.randn(64, 32), torch.randn(32, 48)]

def get_init_inputs():
    return []
"""

C0 = """
import torch
import torch.nn as nn

KERNELPILOT_ORIGIN = "inductor"
KERNELPILOT_LIBRARIES = ("cublas",)
extern_mm = torch.ops.aten.mm


class ModelNew(nn.Module):
    def forward(self, a, b):
        return extern_mm(a, b)
"""


@pytest.mark.parametrize("declared,status,severity", [(True, "ok", "warn"), (False, "rejected", "reject")])
def test_a_library_only_c0_is_not_refused_for_it(tmp_path: Path, declared: bool, status: str, severity: str) -> None:
    from kernelpilot.evaluation import EvalSettings, Evaluator

    source = C0 if declared else "\n".join(line for line in C0.splitlines() if not line.startswith("KERNELPILOT_"))
    (tmp_path / "problem.py").write_text(PROBLEM)
    (tmp_path / "c0.py").write_text(source)
    settings = EvalSettings(device="cpu", confine=False, trials=2)
    with Evaluator(settings, workdir=tmp_path / "work", keep_warm=False) as ev:
        v = ev.evaluate(tmp_path / "problem.py", tmp_path / "c0.py", "test")
    found = {f.rule: f.severity for f in v.findings}
    assert v.status == status, (v.status, v.summary, found)
    assert found["no-kernel"] == severity
    assert v.correctness is not None and v.correctness.passed
    if declared:
        assert found["library-call"] == "warn"


C0_EAGER_OP = C0.replace('("cublas",)', '("cublas", "aten.tanh")').replace("return extern_mm(a, b)",
                                                                          "return torch.tanh(extern_mm(a, b))")
PROBLEM_TANH = PROBLEM.replace("return torch.matmul(a, b)", "return torch.tanh(torch.matmul(a, b))")


@pytest.mark.parametrize("origin,status", [(True, "ok"), (False, "rejected")])
def test_an_eager_op_is_allowed_by_name_only_for_torch_compiles_own_run(tmp_path: Path, origin: bool,
                                                                       status: str) -> None:
    from kernelpilot.evaluation import EvalSettings, Evaluator

    source = C0_EAGER_OP if origin else C0_EAGER_OP.replace('KERNELPILOT_ORIGIN = "inductor"\n', "")
    (tmp_path / "problem.py").write_text(PROBLEM_TANH)
    (tmp_path / "c0.py").write_text(source)
    with Evaluator(EvalSettings(device="cpu", confine=False, trials=2), workdir=tmp_path / "work",
                   keep_warm=False) as ev:
        v = ev.evaluate(tmp_path / "problem.py", tmp_path / "c0.py", "test")
    calls = {f.evidence for f in v.findings if f.rule == "library-call"}
    assert v.status == status, (v.status, v.summary, [(f.rule, f.severity) for f in v.findings])
    assert ("aten.tanh" in calls) == origin and "cublas" in calls


def test_declared_eager_ops_lift_the_operator_audit_for_that_op_only(tmp_path: Path) -> None:
    import torch

    from kernelpilot.evaluation.audit import runtime as ra
    from kernelpilot.evaluation.candidate import load_candidate
    from kernelpilot.evaluation.static.declarations import declared_settings
    from kernelpilot.verdict import Verdict

    (tmp_path / "c0.py").write_text(C0_EAGER_OP)
    settings, _ = declared_settings(load_candidate(tmp_path / "c0.py"), EvalSettings(), Verdict(status="ok"))
    assert settings.allowed_libraries == ["cublas", "aten.tanh"]
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    ops, _ = ra.record_ops(lambda x, y: torch.sigmoid(torch.tanh(x @ y)), [a, b])
    refused = {f.evidence for f in ra.op_findings(ops, settings.allowed_libraries, 16) if f.severity == "reject"}
    assert refused == {"aten.sigmoid"}  # tanh declared, mm is cuBLAS's; sigmoid is still the candidate's to write


def test_an_aten_fallback_c0_is_torch_compiles_own_run_too() -> None:
    """level1/46's c0 is Inductor's fallback to aten.avg_pool3d alone (H200): no kernel of its own, as
    torch.compile's run; that is a warning for an Inductor-origin candidate, a rejection for any other."""
    from kernelpilot.evaluation.static.declarations import runs_torch_compile_libraries

    inductor = {"KERNELPILOT_ORIGIN": "inductor"}
    assert runs_torch_compile_libraries(inductor, EvalSettings(allowed_libraries=["aten.avg_pool3d"]))
    assert runs_torch_compile_libraries(inductor, EvalSettings(allowed_libraries=["cudnn"]))
    assert not runs_torch_compile_libraries(inductor, EvalSettings(allowed_libraries=[]))
    assert not runs_torch_compile_libraries({}, EvalSettings(allowed_libraries=["aten.avg_pool3d", "cublas"]))
    assert not runs_torch_compile_libraries(inductor, EvalSettings(allowed_libraries=["avg_pool3d_but_not_aten"]))
