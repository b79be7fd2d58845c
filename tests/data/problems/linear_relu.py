import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear (with bias) then ReLU; also returns the pre-activation."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.register_buffer("scale", torch.ones(out_features))

    def forward(self, x):
        y = self.linear(x) * self.scale
        return torch.relu(y), y


batch, in_features, out_features = 16, 64, 32


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
