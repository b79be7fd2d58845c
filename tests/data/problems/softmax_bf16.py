import torch
import torch.nn as nn

batch, dim = 128, 1000


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.rand(batch, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
