"""A training drop-in's verdict says its times are forwards only (kernelpilot/evaluation/static/training.py): a
chunked head+loss computes the gradients in its forward, and read 0.23x torch.compile on an H100 while the
training step it went into was faster."""

from __future__ import annotations

from pathlib import Path

from kernelpilot.evaluation.static.training import FORWARD_ONLY, defines_backward, forward_only_flag
from kernelpilot.verdict import Performance, Timing

CHUNKED = Path(__file__).parent / "data" / "dropin" / "head_loss_chunked.py"


def _timed() -> Performance:
    return Performance(candidate=Timing(median_ms=29.6, q1_ms=29.5, q3_ms=29.8, min_ms=29.4, samples=50),
                       eager=Timing(median_ms=14.3, q1_ms=14.2, q3_ms=14.4, min_ms=14.1, samples=50))


def test_a_modelnew_with_backward_is_a_training_drop_in(tmp_path: Path) -> None:
    assert defines_backward(CHUNKED)
    plain = tmp_path / "model_new.py"
    plain.write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                     "        return x\n\n\nclass Helper:\n    def backward(self, g):\n        return g\n")
    assert not defines_backward(plain)  # another class's backward is not ModelNew's
    broken = tmp_path / "broken.py"
    broken.write_text("class ModelNew(:\n")
    assert not defines_backward(broken)
    assert not defines_backward(tmp_path / "missing.py")


def test_only_a_timed_verdict_of_a_training_drop_in_is_flagged(tmp_path: Path) -> None:
    assert forward_only_flag(CHUNKED, _timed()) == [FORWARD_ONLY]
    assert "kernelpilot apply" in FORWARD_ONLY and "forward" in FORWARD_ONLY
    assert forward_only_flag(CHUNKED, None) == []  # test mode: nothing timed
    assert forward_only_flag(CHUNKED, Performance()) == []
    assert forward_only_flag(None, _timed()) == []
    plain = tmp_path / "model_new.py"
    plain.write_text("class ModelNew:\n    def forward(self, x):\n        return x\n")
    assert forward_only_flag(plain, _timed()) == []
