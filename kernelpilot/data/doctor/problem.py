"""kernelpilot doctor's problem: y = 2 * x + 1 over 1M float32 values (a verdict in seconds)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2.0 * x + 1.0


def get_inputs():
    return [torch.randn(1 << 20)]


def get_init_inputs():
    return []
