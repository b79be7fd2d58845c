import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Correct for its first three calls, then never returns (a hang the first call cannot reveal)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, x, y):
        self.calls += 1
        while self.calls > 3:
            pass
        return torch.add(y, x, alpha=self.scale)
