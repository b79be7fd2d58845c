"""The starter candidate of ``kernelpilot init --language cute``: the starter problem's row softmax written in
CUTLASS's CuTe DSL (``@cute.kernel`` / ``@cute.jit``), correct and simple; starter.py writes it. It compiles
on the CPU for sm_90a (tests/test_cute.py, marker ``cute``)."""

from __future__ import annotations

STARTER_CUTE_MODEL = '''"""Starter CuTe-DSL candidate: a row softmax, one CTA per row (correct, not fast: three
passes over the row). Make it fast the way skills/cute-dsl.md says: 128-bit vectors, the row in registers,
an online max and sum."""

import math
import operator

import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cuda.bindings.driver import CUstream
from cutlass.cute.runtime import from_dlpack

THREADS = 128


@cute.jit
def block_reduce(value: cutlass.Float32, slots: cute.Tensor, op: cutlass.Constexpr, threads: cutlass.Constexpr):
    """Every thread's ``value`` reduced over the CTA: butterfly shuffles in the warp, one smem slot per warp."""
    tidx, _, _ = cute.arch.thread_idx()
    value = cute.arch.warp_reduction(value, op)
    if tidx % 32 == 0:
        slots[tidx // 32] = value
    cute.arch.sync_threads()
    total = slots[0]
    for w in cutlass.range_constexpr(1, threads // 32):
        total = op(total, slots[w])
    cute.arch.sync_threads()  # the slots are reused by the next reduction
    return total


@cute.kernel
def softmax_kernel(mX: cute.Tensor, mY: cute.Tensor, threads: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n = mX.shape[1]
    smem = cutlass.utils.SmemAllocator()
    slots = smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), byte_alignment=16)
    peak = cutlass.Float32(-math.inf)
    for j in cutlass.range(tidx, n, threads):
        peak = cute.arch.fmax(peak, mX[row, j].to(cutlass.Float32))
    peak = block_reduce(peak, slots, cute.arch.fmax, threads)
    total = cutlass.Float32(0.0)
    for j in cutlass.range(tidx, n, threads):
        total = total + cute.math.exp(mX[row, j].to(cutlass.Float32) - peak)
    total = block_reduce(total, slots, operator.add, threads)
    for j in cutlass.range(tidx, n, threads):
        mY[row, j] = (cute.math.exp(mX[row, j].to(cutlass.Float32) - peak) / total).to(mY.element_type)


@cute.jit
def softmax_host(mX: cute.Tensor, mY: cute.Tensor, stream: CUstream):
    softmax_kernel(mX, mY, THREADS).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1), stream=stream)


def _tensor(t: torch.Tensor) -> cute.Tensor:
    return from_dlpack(t, assumed_align=16).mark_compact_shape_dynamic(mode=0, stride_order=(0, 1))


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.compiled = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        mX, mY = _tensor(x), _tensor(y)
        stream = CUstream(torch.cuda.current_stream().cuda_stream)
        key = (x.dtype, x.shape[-1])
        if key not in self.compiled:
            self.compiled[key] = cute.compile(softmax_host, mX, mY, stream)
        self.compiled[key](mX, mY, stream)
        return y
'''
