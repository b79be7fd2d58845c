import torch
import torch.nn as nn


class Model(nn.Module):
    """Data-dependent output shape: has no meta kernel, so analysis falls back to CPU."""

    def forward(self, x, threshold: float):
        return x[x > threshold]


def get_inputs():
    torch.manual_seed(1)
    return [torch.rand(100), 0.5]


def get_init_inputs():
    return []
