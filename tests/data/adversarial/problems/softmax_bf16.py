"""Row softmax in bfloat16 over 32768 columns: every output is about 3e-5, far below the bf16
tolerance of 1e-2, so an all-zero output passes a plain allclose (a low-magnitude problem)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(1024, 32768, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
