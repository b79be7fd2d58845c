import torch
import torch.nn as nn


class Model(nn.Module):
    """A convolution chain: conv 3x3, ReLU, conv 1x1 (Inductor calls cuDNN through extern_kernels)."""

    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, hidden, 3, padding=1)
        self.conv2 = nn.Conv2d(hidden, out_channels, 1)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x)))


def get_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return [3, 8, 4]
