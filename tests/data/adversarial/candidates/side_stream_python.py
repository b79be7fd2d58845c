"""Cheat (side stream, Python): the launch happens under another torch.cuda.stream."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha
        self.side = torch.cuda.Stream()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.cuda.stream(self.side):
            return _ext.scale_add(x, y, self.alpha, 0)
