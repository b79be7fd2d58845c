"""Cheat (side stream), Triton twin: the Triton launch happens under another torch.cuda.stream."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 1:  # write nothing (stale memory)
        mask = offs < 0
    if MODE == 2:  # write only the first half (partial write)
        mask = offs < n // 2
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float, mode: int = 0) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    scale_add_kernel[(triton.cdiv(n, 4096),)](x, y, out, alpha, n, BLOCK=4096, MODE=mode, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha
        self.side = torch.cuda.Stream()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.cuda.stream(self.side):
            return scale_add(x, y, self.alpha)
