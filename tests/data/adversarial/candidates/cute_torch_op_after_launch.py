"""Cheat (a PyTorch op after the launch), CuTe twin: the kernel runs, the answer comes from torch."""
import cutlass
import cutlass.cute as cute
import torch
from cuda.bindings.driver import CUstream
from cutlass.cute.runtime import from_dlpack
from torch import nn


@cute.kernel
def scale_add_kernel(gX: cute.Tensor, gY: cute.Tensor, gO: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    n = cute.size(gX)
    if i < n:
        gO[i] = alpha * gX[i] + gY[i]


@cute.jit
def scale_add_host(mX: cute.Tensor, mY: cute.Tensor, mO: cute.Tensor, alpha: cutlass.Float32, stream: CUstream):
    threads = 256
    blocks = (cute.size(mX) + threads - 1) // threads
    scale_add_kernel(mX, mY, mO, alpha).launch(grid=(blocks, 1, 1), block=(threads, 1, 1), stream=stream)


_compiled: dict = {}


def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    mX, mY, mO = (from_dlpack(t.view(-1), assumed_align=16) for t in (x, y, out))
    stream = CUstream(torch.cuda.current_stream().cuda_stream)
    if x.numel() not in _compiled:
        _compiled[x.numel()] = cute.compile(scale_add_host, mX, mY, mO, cutlass.Float32(alpha), stream)
    _compiled[x.numel()](mX, mY, mO, cutlass.Float32(alpha), stream)
    return out


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        scale_add(x, y, self.alpha)
        return self.alpha * x + y
