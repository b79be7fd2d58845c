"""The up-projection of a transformer MLP: a bf16 linear layer followed by tanh-GELU.

Eager PyTorch runs the GEMM (with the bias fused by cuBLAS) and then a separate GELU kernel that
reads and writes the whole [tokens, 4 * hidden] activation once more.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x), approximate="tanh")


tokens = 8192
hidden_size = 4096
intermediate_size = 16384


def get_inputs():
    return [torch.randn(tokens, hidden_size, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden_size, intermediate_size]
