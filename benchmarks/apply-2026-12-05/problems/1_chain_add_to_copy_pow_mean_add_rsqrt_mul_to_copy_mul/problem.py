"""A chain of 9 calls in model.model.layers.0 as `train.py` ran it (16 time(s) a step): add -> _to_copy -> pow -> mean -> add -> rsqrt -> mul -> _to_copy -> mul.
Unfused it moves 1409683456 bytes; one fused kernel must move 469831680.
  - an intermediate is used by aten::add (model.layers.0) (returned as well)
  - an intermediate is saved for backward (autograd's: a kernel with a backward of its own need not write it)
  - an intermediate is saved for backward (autograd's: a kernel with a backward of its own need not write it)
  - an intermediate is saved for backward (autograd's: a kernel with a backward of its own need not write it)

Extracted by `kernelpilot hotspots` on 2026-12-05; origin.json says where from.
"""

from pathlib import Path

import torch
import torch.nn as nn

WEIGHTS = Path(__file__).with_name('weights.pt')


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.p_post_attention_layernorm_weight = nn.Parameter(1 + 0.1 * torch.randn((2048,), dtype=torch.bfloat16))

    def forward(self, x0, x1):
        v1 = torch.ops.aten.add.Tensor(x0, x1)
        v2 = torch.ops.aten._to_copy.default(v1, dtype=torch.float32)
        v3 = torch.ops.aten.pow.Tensor_Scalar(v2, 2)
        v4 = torch.ops.aten.mean.dim(v3, [-1], True)
        v5 = torch.ops.aten.add.Tensor(v4, 1e-05)
        v6 = torch.ops.aten.rsqrt.default(v5)
        v7 = torch.ops.aten.mul.Tensor(v2, v6)
        v8 = torch.ops.aten._to_copy.default(v7, dtype=torch.bfloat16)
        v9 = torch.ops.aten.mul.Tensor(self.p_post_attention_layernorm_weight, v8)
        return (v9, v1)


def get_inputs():
    x0 = torch.randn((16, 1024, 2048), dtype=torch.bfloat16)
    x1 = torch.randn((16, 1024, 2048), dtype=torch.bfloat16)
    return [x0, x1]


def get_init_inputs():
    return []
