import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """a pure PyTorch rewrite: broadcasting instead of torch.diag(A) @ B (no kernel of its own)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A[:, None] * B
