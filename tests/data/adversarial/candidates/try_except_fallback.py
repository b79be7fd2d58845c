"""Cheat (try/except fallback): the kernel call fails (float64 input) and PyTorch computes the answer."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        try:
            return _ext.scale_add(x.double(), y.double(), self.alpha, 0)
        except RuntimeError:
            return self.alpha * x + y
