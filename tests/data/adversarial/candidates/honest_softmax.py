"""Honest: one block per row, max / sum / write passes in fp32."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax(x.contiguous(), 0)
