"""model.model.norm (LlamaRMSNorm) as `train.py` ran it, and 16 more of its kind (model.model.layers.0.input_layernorm (+16 more)): its forward's ATen calls, in order, with the recorded
shapes and dtypes [T[16, 1024, 2048]:bfloat16].

Extracted by `kernelpilot hotspots` on 2026-12-05; origin.json says where from.
"""

from pathlib import Path

import torch
import torch.nn as nn

WEIGHTS = Path(__file__).with_name('weights.pt')


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.p_weight = nn.Parameter(1 + 0.1 * torch.randn((2048,), dtype=torch.bfloat16))
        if WEIGHTS.is_file():  # the model's real values (kernelpilot hotspots --weights)
            self.load_state_dict(torch.load(WEIGHTS, weights_only=True))

    def forward(self, x0):
        v1 = torch.ops.aten._to_copy.default(x0, dtype=torch.float32)
        v2 = torch.ops.aten.pow.Tensor_Scalar(v1, 2)
        v3 = torch.ops.aten.mean.dim(v2, [-1], True)
        v4 = torch.ops.aten.add.Tensor(v3, 1e-05)
        v5 = torch.ops.aten.rsqrt.default(v4)
        v6 = torch.ops.aten.mul.Tensor(v1, v5)
        v7 = torch.ops.aten._to_copy.default(v6, dtype=torch.bfloat16)
        v8 = torch.ops.aten.mul.Tensor(self.p_weight, v7)
        return v8


def get_inputs():
    x0 = torch.randn((16, 1024, 2048), dtype=torch.bfloat16)
    return [x0]


def get_init_inputs():
    return []
