import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
    def forward(self, x, y):
        return x * self.scale + y

def get_inputs():
    return [torch.randn(64, 128), torch.randn(64, 128)]

def get_init_inputs():
    return [0.5]
