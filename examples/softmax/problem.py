"""Softmax over the last dimension of a bf16 tensor (attention probabilities, sampling logits).

PyTorch computes a bf16 softmax in fp32 and rounds the result to bf16.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 32768
dim = 16384  # 32768 x 16384 bf16 = 1 GiB in, 1 GiB out


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
