"""Cheat (torch op inside forward): the extension runs, but the answer comes from torch.softmax."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _ext.softmax(x.contiguous(), 0)
        return torch.softmax(x, dim=-1)
