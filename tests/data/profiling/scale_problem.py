"""y = alpha * x over 16M float32 values: memory-bound, 128 MiB moved per call."""

import torch
import torch.nn as nn

n = 16 * 1024 * 1024


class Model(nn.Module):
    def __init__(self, alpha: float = 2.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return self.alpha * x


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return [2.0]
