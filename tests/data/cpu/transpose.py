import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.t()

def get_inputs():
    return [torch.randn(32, 48)]

def get_init_inputs():
    return []
