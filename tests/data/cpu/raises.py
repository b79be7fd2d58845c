import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()

    def forward(self, x, y):
        raise ValueError("kernel launch config is wrong")
