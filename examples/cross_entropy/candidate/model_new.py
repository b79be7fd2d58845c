"""Reference candidate: streaming cross-entropy, mean over rows (see cross_entropy.cu)."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.cross_entropy(logits.contiguous(), targets.contiguous(), -100)
