"""Cheat (stale memory): a kernel runs but writes nothing; the output is whatever memory the allocator
returns (the reference's old result, in the Sakana incident). The NaN-poisoned allocator catches it."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _ext.scale_add(x, y, self.alpha, 7)
