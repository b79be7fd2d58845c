"""Reference candidate: one cuBLASLt matmul with the GELU_BIAS epilogue (see gemm_bias_gelu.cu)."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelpilot.extension import load_extension

# libcublasLt by soname: the pip CUDA wheels ship only libcublasLt.so.13, without the unversioned link.
_ext = load_extension(__file__, extra_ldflags=["-l:libcublasLt.so.13"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_gelu(x.contiguous(), self.linear.weight, self.linear.bias)
