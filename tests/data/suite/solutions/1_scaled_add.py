"""A KernelBench-style single-file candidate for the CPU tests: its load_inline is never called, forward
runs torch.add (allowed under --rules kernelbench, refused under kernelpilot's rules)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def _compile():
    return load_inline(name="never_built", cpp_sources="", functions=[])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return torch.add(y, x, alpha=self.scale)
