"""Cheat (background thread): forward returns at once; a thread fills the output later."""
import threading

import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)

        def work() -> None:
            out.copy_(_ext.scale_add(x, y, self.alpha, 0))

        threading.Thread(target=work, name='kp-background').start()
        return out
