import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """a pure PyTorch rewrite: F.linear and relu_ (no kernel of its own)."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return F.linear(x, self.gemm.weight, self.bias).relu_()
