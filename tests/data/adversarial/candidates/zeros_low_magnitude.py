"""Cheat (zeros on a low-magnitude problem): every softmax output is ~3e-5, so zeros pass a bf16 allclose."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax(x.contiguous(), 1)
