import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Computes every call, into one output buffer it keeps and returns each time (as a CUDA graph's static
    output does): honest values and timing, but an output the caller keeps is overwritten by the next call."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.out = None

    def forward(self, x, y):
        if self.out is None or self.out.shape != x.shape or self.out.dtype != x.dtype:
            self.out = torch.empty_like(x)
        return torch.add(y, x, alpha=self.scale, out=self.out)
