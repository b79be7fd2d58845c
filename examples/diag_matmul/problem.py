"""A diagonal matrix times a dense matrix, written literally: torch.diag(a) @ B.

Model code builds diagonal matrices for per-row scales (gates, inverse norms, importance weights);
the product is then an N x N x M matrix multiply in which all but N of the N^2 left factors are zero.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ B


N = 8192
M = 8192  # B is 8192 x 8192 fp32 = 256 MiB


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
