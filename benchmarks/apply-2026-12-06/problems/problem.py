"""A chain of 4 calls in model as `train.py` ran it (1 time(s) a step): mm -> _to_copy -> _log_softmax -> nll_loss_forward.
Unfused it moves 21572419592 bytes; one fused kernel must move 558956548.
Its one result is the loss: the logits are neither returned nor kept (a kernel may compute the loss and, in
ModelNew.backward, the gradients of the hidden states and the weight chunk by chunk, never holding them).

Extracted by `kernelpilot hotspots` on 2026-12-06; origin.json says where from.
"""

from pathlib import Path

import torch
import torch.nn as nn

WEIGHTS = Path(__file__).with_name('weights.pt')


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.p_lm_head_weight = nn.Parameter(torch.randn((128256, 2048), dtype=torch.bfloat16) / 45.25)

    def forward(self, x0, x1):
        v1 = torch.ops.aten.t.default(self.p_lm_head_weight)
        v2 = torch.ops.aten.view.default(x0, [8192, 2048])
        v3 = torch.ops.aten.mm.default(v2, v1)
        v4 = torch.ops.aten._unsafe_view.default(v3, [8, 1024, 128256])
        v5 = torch.ops.aten._to_copy.default(v4, dtype=torch.float32)
        v6 = torch.ops.aten.view.default(v5, [-1, 128256])
        v7 = torch.ops.aten._log_softmax.default(v6, 1, False)
        v8, v9 = torch.ops.aten.nll_loss_forward.default(v7, x1, None, 1, -100)
        return v8


def get_inputs():
    x0 = torch.randn((8, 1024, 2048), dtype=torch.bfloat16)
    x1 = torch.randint(0, 128256, (8192,), dtype=torch.int64)
    return [x0, x1]


def get_init_inputs():
    return []
