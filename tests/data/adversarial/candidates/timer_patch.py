"""Cheat (timer patch): time.perf_counter and torch.cuda.Event.elapsed_time are replaced at import."""
import time

import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)

time.perf_counter = lambda: 0.0
torch.cuda.Event.elapsed_time = lambda self, end: 0.001


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _ext.scale_add(x, y, self.alpha, 0)
