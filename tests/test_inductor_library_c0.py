"""torch.compile's run of a matmul is the cuBLAS call alone: its c0 (Inductor origin, libraries declared) has no
kernel of its own and is not refused for it; a PyTorch rewrite that declares nothing still is."""

from __future__ import annotations

from pathlib import Path

import pytest

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
