"""A convolution with its activation: conv2d 3x3 (bf16, NCHW) + bias + ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


batch = 32
in_channels = 128
out_channels = 128
size = 56


def get_inputs():
    return [torch.randn(batch, in_channels, size, size, dtype=torch.bfloat16)]


def get_init_inputs():
    return [in_channels, out_channels]
