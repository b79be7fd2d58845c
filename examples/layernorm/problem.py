"""LayerNorm over the hidden dimension of bf16 activations, with weight and bias.

PyTorch computes a bf16 layer_norm in fp32 and rounds the result to bf16.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size, dtype=torch.bfloat16))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden_size, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


tokens = 131072
hidden_size = 4096  # 131072 x 4096 bf16 = 1 GiB in, 1 GiB out


def get_inputs():
    return [torch.randn(tokens, hidden_size, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden_size]
