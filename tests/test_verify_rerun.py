"""The determinism re-run on inputs too large to keep: drawn again from the first trial's seed and checked
against a fingerprint of the originals; skipped, and said, when the problem draws from another source."""

from __future__ import annotations

from pathlib import Path

import pytest

PROBLEM = """
import numpy as np
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return x * 2.0 + y

def get_inputs():
    return [torch.randn(64, 64), {second}]

def get_init_inputs():
    return []
"""

CANDIDATE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x, y):
        out = x * 2.0 + y
        {noise}
        return out
"""


def _verdict(tmp_path: Path, second: str, noise: str = "") -> dict:
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "p.py").write_text(PROBLEM.format(second=second))
    (tmp_path / "c.py").write_text(CANDIDATE.format(noise=noise))
    settings = EvalSettings(device="cpu", confine=False, trials=2)
    msg = {"op": "evaluate", "problem": str(tmp_path / "p.py"), "candidate_model": str(tmp_path / "c.py"),
           "candidate_dir": str(tmp_path), "mode": "test", "settings": settings.to_dict(), "own_kernels": [],
           "kind": "pytorch"}
    return Worker("cpu").evaluate(msg)["verdict"]["correctness"]


@pytest.fixture
def nothing_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.evaluation.correctness import verify

    monkeypatch.setattr(verify, "STASH_BYTES", 0)  # every input set counts as too large to keep


def test_large_inputs_are_drawn_again_for_the_rerun(tmp_path: Path, nothing_kept: None) -> None:
    corr = _verdict(tmp_path, "torch.randn(64, 64)")
    assert corr["passed"] and corr["deterministic"] is True
    assert not any("re-run skipped" in n for n in corr["notes"])


def test_a_nondeterministic_candidate_is_still_caught(tmp_path: Path, nothing_kept: None) -> None:
    noise = "self.calls = getattr(self, 'calls', 0) + 1; out = out + self.calls * 1e-7"
    corr = _verdict(tmp_path, "torch.randn(64, 64)", noise)
    assert corr["deterministic"] is False


def test_inputs_from_another_random_source_skip_the_rerun(tmp_path: Path, nothing_kept: None) -> None:
    corr = _verdict(tmp_path, "torch.from_numpy(np.random.randint(0, 100, (64, 64)))")  # integers are kept as drawn
    assert any("re-run skipped" in n for n in corr["notes"]), corr["notes"]
    assert corr["deterministic"] is None or corr["deterministic"] is True


def test_a_problem_whose_answer_is_constant_cannot_discriminate(tmp_path: Path) -> None:
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.worker.main import Worker

    problem = PROBLEM.format(second="torch.randn(64, 64)").replace("return x * 2.0 + y", "return torch.ones_like(x)")
    (tmp_path / "p.py").write_text(problem)
    (tmp_path / "c.py").write_text(CANDIDATE.format(noise="out = torch.ones_like(x)"))
    settings = EvalSettings(device="cpu", confine=False, trials=3)
    msg = {"op": "evaluate", "problem": str(tmp_path / "p.py"), "candidate_model": str(tmp_path / "c.py"),
           "candidate_dir": str(tmp_path), "mode": "test", "settings": settings.to_dict(), "own_kernels": [],
           "kind": "pytorch"}
    corr = Worker("cpu").evaluate(msg)["verdict"]["correctness"]
    assert corr["passed"] and corr["discriminates"] is False  # zeros fail at once; a constant passes every trial
    assert any("a constant output passes" in n for n in corr["notes"]), corr["notes"]
