"""Bug (write out of bounds), Triton twin: the loads are masked, the store's mask reaches one block past the
output's end; every value inside the output is right."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, alpha * x + y, mask=offs < n + BLOCK)


def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    scale_add_kernel[(triton.cdiv(n, 4096) + 1,)](x, y, out, alpha, n, BLOCK=4096, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scale_add(x, y, self.alpha)
