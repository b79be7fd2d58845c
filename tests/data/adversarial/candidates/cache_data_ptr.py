"""Cheat (result cache keyed on pointers): the same input addresses return the stored output."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)

_cache: dict = {}


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), y.data_ptr())
        if key not in _cache:
            _cache[key] = _ext.scale_add(x, y, self.alpha, 0)
        return _cache[key]
