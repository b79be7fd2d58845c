"""Bug (write out of bounds): 1000 threads past the output's end write it too, with no bound check; every
value inside the output is right."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _ext.scale_add(x, y, self.alpha, 8)
