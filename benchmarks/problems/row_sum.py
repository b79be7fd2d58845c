"""A reduction: the sum of squares over the last dimension, in fp32 (1 GiB in, 512 KiB out)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * x).sum(dim=-1)


rows = 131072
cols = 2048


def get_inputs():
    return [torch.randn(rows, cols, dtype=torch.float32)]


def get_init_inputs():
    return []
