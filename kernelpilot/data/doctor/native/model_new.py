"""kernelpilot doctor's native candidate: affine.cu's kernel, launched by binding.cpp."""

import torch
import torch.nn as nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.affine(x.contiguous())
