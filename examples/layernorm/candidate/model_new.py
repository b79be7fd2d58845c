"""Reference candidate: one-pass LayerNorm (see layernorm.cu)."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=torch.bfloat16))
        self.bias = nn.Parameter(torch.zeros(hidden_size, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm(x.contiguous(), self.weight, self.bias, self.eps)
