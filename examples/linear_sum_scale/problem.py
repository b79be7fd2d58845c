"""A linear layer whose outputs are only ever summed: (x @ W.T) / 2, summed over features, scaled.

The model spends a full GEMM (batch x out_features x in_features) on a result it immediately
collapses to one number per row.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * in_features**-0.5)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.weight.T  # [batch, out_features]
        y = y / 2
        y = torch.sum(y, dim=1, keepdim=True)  # [batch, 1]
        return y * self.scaling_factor


batch_size = 8192
in_features = 4096
out_features = 8192
scaling_factor = 1.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
