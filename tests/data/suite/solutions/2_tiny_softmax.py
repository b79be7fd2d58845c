"""A wrong softmax (every row sums to 1, values do not match): incorrect."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def _compile():
    return load_inline(name="never_built", cpp_sources="", functions=[])


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full_like(x, 1.0 / x.shape[1])
