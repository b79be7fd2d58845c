"""RMSNorm in CUTLASS's CuTe DSL, the way QuACK writes its reduction kernels (our own code).

One cluster of ``cluster`` CTAs per row (one CTA up to 32K bf16 / 16K fp32 elements; 2-8 past that, so that a
thread never holds more than 16 vectors). Each CTA takes a contiguous slice of the row; each thread owns ``iters``
vectors of ``vec`` elements (128 bits: 8 bf16 or 4 fp32), laid out so that a warp's threads cover contiguous
512 B; the slice stays in registers between the reduction and the epilogue (x is read once, y written once). The
sum of squares is accumulated in fp32: per thread, across the warp by butterfly shuffles, across warps through
one shared-memory slot per warp and one barrier, and across the cluster's CTAs through distributed shared
memory: each CTA stores its total into slot ``rank`` of every CTA of its cluster, then one cluster barrier
(release, acquire) makes them visible. For bf16 rows of 128K elements and more the epilogue reads x again (an L2
hit) instead of keeping it in registers: more CTAs an SM (row_config.py says which shape each length gets). The launch goes to torch's current stream. Compiled functions are kept per (dtype, N) in this module and, in kernelpilot's
worker, on disk (worker/cute_hook.py).
"""

import math
import operator

import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cuda.bindings.driver import CUstream
from cutlass.cute.runtime import from_dlpack

from row_config import row_config


@cute.kernel
def rmsnorm_kernel(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32,
                   vec: cutlass.Constexpr, iters: cutlass.Constexpr, threads: cutlass.Constexpr,
                   cluster: cutlass.Constexpr, reload: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    row = bidx // cluster
    rank = bidx % cluster  # this CTA's place in its row's cluster (clusters run along x)
    first = rank * (iters * threads)  # the CTA's slice of the row starts at this vector
    n = mX.shape[1]
    nvec = n // vec
    # (vec, n / vec): column j of the tiled view is the j-th 128-bit vector of the row
    gX = cute.zipped_divide(mX[row, None], (vec,))
    gY = cute.zipped_divide(mY[row, None], (vec,))
    gW = cute.zipped_divide(mW, (vec,))
    rX = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    rX.fill(0)
    # 1. load the row slice into registers, 128 bits at a time; out-of-range vectors stay zero
    for i in cutlass.range_constexpr(iters):
        j = first + i * threads + tidx
        if j < nvec:
            cute.autovec_copy(gX[None, j], rX[None, i])
    # 2. sum of squares in fp32: thread, warp (butterfly), block (one smem slot per warp)
    xf = rX.load().to(cutlass.Float32)
    local = (xf * xf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    warp_sum = cute.arch.warp_reduction(local, operator.add)
    smem = cutlass.utils.SmemAllocator()
    slots = smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), byte_alignment=16)
    partials = smem.allocate_tensor(cutlass.Float32, cute.make_layout(cluster), byte_alignment=16)
    lane = tidx % 32
    warp = tidx // 32
    if lane == 0:
        slots[warp] = warp_sum
    cute.arch.sync_threads()
    total = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(threads // 32):
        total = total + slots[w]
    if cutlass.const_expr(cluster > 1):
        # 2b. across the cluster: thread t sends this CTA's total to CTA t, into its slot `rank`
        if tidx < cluster:
            remote = cute.arch.map_dsmem_ptr(partials.iterator + rank, tidx)
            cute.arch.inline_ptx("st.shared::cluster.f32 [{$r0}], {$r1};",
                                 read_only_args=[cutlass.Int32(remote.toint()), total])
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        total = cutlass.Float32(0.0)
        for c in cutlass.range_constexpr(cluster):
            total = total + partials[c]
    inv = cute.math.rsqrt(total / cutlass.Float32(n) + eps, fastmath=True)
    # 3. scale, multiply by the weight, round, store 128 bits at a time
    if cutlass.const_expr(reload):
        # long bf16 rows: x is read again a vector at a time (from L2: the slice was read moments ago) rather than
        # kept, so that a thread needs few registers and more CTAs fit an SM
        for i in cutlass.range_constexpr(iters):
            j = first + i * threads + tidx
            if j < nvec:
                rx = cute.make_rmem_tensor(cute.make_layout(vec), mX.element_type)
                rw = cute.make_rmem_tensor(cute.make_layout(vec), mW.element_type)
                ry = cute.make_rmem_tensor(cute.make_layout(vec), mY.element_type)
                cute.autovec_copy(gX[None, j], rx)
                cute.autovec_copy(gW[None, j], rw)
                ry.store((rx.load().to(cutlass.Float32) * inv * rw.load().to(cutlass.Float32)).to(mY.element_type))
                cute.autovec_copy(ry, gY[None, j])
    else:
        rW = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mW.element_type)
        rW.fill(0)
        for i in cutlass.range_constexpr(iters):
            j = first + i * threads + tidx
            if j < nvec:
                cute.autovec_copy(gW[None, j], rW[None, i])
        out = xf * inv * rW.load().to(cutlass.Float32)
        rY = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mY.element_type)
        rY.store(out.to(mY.element_type))
        for i in cutlass.range_constexpr(iters):
            j = first + i * threads + tidx
            if j < nvec:
                cute.autovec_copy(rY[None, i], gY[None, j])


@cute.jit
def rmsnorm_host(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, stream: CUstream,
                 vec: cutlass.Constexpr, iters: cutlass.Constexpr, threads: cutlass.Constexpr,
                 cluster: cutlass.Constexpr, reload: cutlass.Constexpr):
    rmsnorm_kernel(mX, mW, mY, eps, vec, iters, threads, cluster, reload).launch(
        grid=(mX.shape[0] * cluster, 1, 1), block=(threads, 1, 1), cluster=(cluster, 1, 1), stream=stream)


def _tensor(t: torch.Tensor) -> cute.Tensor:
    """A 16-byte aligned view whose row count is dynamic (one compile serves every batch size)."""
    return from_dlpack(t, assumed_align=16).mark_compact_shape_dynamic(mode=0, stride_order=(0, 1))


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size, dtype=torch.bfloat16))
        self.compiled = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        x2 = x.reshape(-1, n).contiguous()
        y = torch.empty_like(x2)
        vec, threads, cluster, reload = row_config(n, x.element_size())
        iters = math.ceil(n // vec / (threads * cluster))
        mX, mY = _tensor(x2), _tensor(y)
        mW = from_dlpack(self.weight.detach(), assumed_align=16)
        stream = CUstream(torch.cuda.current_stream().cuda_stream)
        key = (x.dtype, n)
        if key not in self.compiled:
            self.compiled[key] = cute.compile(rmsnorm_host, mX, mW, mY, cutlass.Float32(self.eps), stream,
                                              vec, iters, threads, cluster, reload)
        self.compiled[key](mX, mW, mY, cutlass.Float32(self.eps), stream)
        return y.view(x.shape)
