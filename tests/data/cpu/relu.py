import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(64, 128)]  # non-negative, as KernelBench's ReLU draws them


def get_init_inputs():
    return []
