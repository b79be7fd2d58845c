"""RMSNorm over the hidden dimension of bf16 activations (LLaMA-style, with a learned weight).

Written the way model code usually spells it: upcast to fp32, scale by rsqrt(mean(x^2) + eps),
multiply by the weight, round back to bf16.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


tokens = 131072
hidden_size = 4096  # 131072 x 4096 bf16 = 1 GiB in, 1 GiB out


def get_inputs():
    return [torch.randn(tokens, hidden_size, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden_size]
