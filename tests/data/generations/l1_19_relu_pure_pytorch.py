import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """a pure PyTorch rewrite of ReLU (no kernel of its own)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
