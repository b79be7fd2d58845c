"""Reference candidate: the GEMM-then-sum becomes a column sum of W and a GEMV (see linear_sum.cu)."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.linear_sum(x.contiguous(), self.weight, self.scaling_factor)
