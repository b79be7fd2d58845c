"""A fused elementwise chain: y = silu(x) * gate + bias, then scaled (bf16, 1 GiB per tensor)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(hidden_size, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return 0.5 * (F.silu(x) * gate + self.bias)


tokens = 65536
hidden_size = 8192


def get_inputs():
    return [torch.randn(tokens, hidden_size, dtype=torch.bfloat16),
            torch.randn(tokens, hidden_size, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden_size]
