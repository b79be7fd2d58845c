"""compare.py's check of one CUDA output, fused into two Triton kernels (worker side).

The chunked torch comparison runs some 30 float64 kernels per 16M-element chunk and syncs the host
about eight times per chunk: on the H200 a 1.6e9-element output took seconds per comparison, and a
verdict runs a dozen comparisons (the trials, the zero and constant outputs). Here each element is
read once per pass (in its own dtype, widened to float64 in registers) and every block writes its
partial sums, maxima and counts; torch reduces those, and the host syncs once per comparison.

The element test is compare.py's, operation for operation, in float64 and without contracting a
multiply and an add into one FMA (``enable_fp_fusion=False``), so each element's pass or fail is the
torch path's bit for bit; only the order in which the norms are summed differs. The truth is rounded
to the problem dtype through float32, as torch's own conversion does.

The kernels are compiled in each process on first use, never loaded from Triton's disk cache: that
cache directory is writable by candidates, and a planted binary would decide verdicts. The compiled
kernels are then held in memory for the life of the worker.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch
import triton
import triton.language as tl

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

BLOCK = 4096
_FP_OPTS = {"enable_fp_fusion": False, "num_warps": 8}
SUPPORTED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@triton.jit
def _finite(x):
    return (x == x) & ((x - x) == 0.0)


@triton.jit
def _to_dtype(t, like_ptr, ROUND: tl.constexpr):
    """The float64 truth rounded to the problem dtype (as torch rounds: through float32), widened again."""
    if ROUND:
        return t.to(tl.float32).to(like_ptr.dtype.element_ty).to(tl.float64)
    else:
        return t


# the element counts are not specialised on (divisible by 16 or not): one compile per dtype signature, not one
# more for every shape set
@triton.jit(do_not_specialize=["n"])
def _worst_kernel(r_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr, ROUND: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    fin = _finite(t) & _finite(r) & _finite(_to_dtype(t, r_ptr, ROUND)) & mask
    gap = tl.where(fin, tl.abs(r - t), 0.0)
    tl.store(part_ptr + pid, tl.max(gap, axis=0))


@triton.jit(do_not_specialize=["n", "n_blocks"])
def _check_kernel(o_ptr, r_ptr, t_ptr, p_ptr, fpart_ptr, ipart_ptr, n, n_blocks,
                  BLOCK: tl.constexpr, CONSTANT: tl.constexpr, ROUND: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    atol = tl.load(p_ptr)
    rtol = tl.load(p_ptr + 1)
    atol_slack = tl.load(p_ptr + 2)
    floor = tl.load(p_ptr + 3)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    if CONSTANT:
        o = tl.zeros([BLOCK], dtype=tl.float64) + tl.load(p_ptr + 4)
        o = tl.where(mask, o, 0.0)
    else:
        o = tl.load(o_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    tq = _to_dtype(t, r_ptr, ROUND)
    finite = _finite(t) & _finite(tq)
    # where the truth overflows / is NaN in this dtype, the output must match one reference exactly
    nonfin_ok = (o == tq) | (o == r) | ((o != o) & ((tq != tq) | (r != r)))
    ok_dtype = tl.abs(o - r) <= atol + rtol * tl.abs(r)
    ok_true = tl.abs(o - t) <= atol_slack + rtol * tl.abs(t)
    ok = tl.where(finite, ok_dtype | ok_true, nonfin_ok)
    bad = (ok == 0) & mask
    unwritten = (o != o) & finite & mask
    fm = finite & mask
    err = tl.where(fm, tl.abs(o - t), 0.0)
    tf = tl.where(fm, t, 0.0)
    seen = tl.where(err != err, 0.0, err)  # a NaN output is counted as unwritten, not as a maximum
    rf = tl.where(fm & _finite(r), r, tf)
    diff = rf - tf
    tl.store(fpart_ptr + pid, tl.sum(err * err, axis=0))
    tl.store(fpart_ptr + n_blocks + pid, tl.sum(tf * tf, axis=0))
    tl.store(fpart_ptr + 2 * n_blocks + pid, tl.sum(diff * diff, axis=0))
    tl.store(fpart_ptr + 3 * n_blocks + pid, tl.max(seen, axis=0))
    tl.store(fpart_ptr + 4 * n_blocks + pid, tl.max(seen / tl.maximum(tl.abs(tf), floor), axis=0))
    tl.store(ipart_ptr + pid, tl.sum(bad.to(tl.int32), axis=0).to(tl.int64))
    tl.store(ipart_ptr + n_blocks + pid, tl.sum(unwritten.to(tl.int32), axis=0).to(tl.int64))


@triton.jit(do_not_specialize=["n", "n_blocks"])
def _replay_kernel(c_ptr, e_ptr, p_ptr, part_ptr, n, n_blocks, BLOCK: tl.constexpr):
    """compare.replay_difference per block: over the elements where eager is finite, (cand - eager)^2, eager^2,
    NaN in cand, and elements outside atol + rtol*|eager|."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    atol = tl.load(p_ptr)
    rtol = tl.load(p_ptr + 1)
    c = tl.load(c_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    e = tl.load(e_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    fin = _finite(e) & mask
    d = tl.where(fin, c - e, 0.0)
    ef = tl.where(fin, e, 0.0)
    outside = fin & ((tl.abs(d) <= atol + rtol * tl.abs(ef)) == 0)  # NaN in cand counts as outside
    holes = (c != c) & fin
    tl.store(part_ptr + pid, tl.sum(d * d, axis=0))
    tl.store(part_ptr + n_blocks + pid, tl.sum(ef * ef, axis=0))
    tl.store(part_ptr + 2 * n_blocks + pid, tl.sum(holes.to(tl.int32), axis=0).to(tl.float64))
    tl.store(part_ptr + 3 * n_blocks + pid, tl.sum(outside.to(tl.int32), axis=0).to(tl.float64))


def _launch(kernel: JITFunction, grid: tuple[int], args: tuple[object, ...], **meta: Any) -> None:
    """Launch; a specialisation not yet compiled in this process is compiled here, never read from the
    candidate-writable disk cache (the JIT keeps what it compiled in memory: later launches compile nothing)."""
    saved = os.environ.get("TRITON_ALWAYS_COMPILE")
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    try:
        kernel[grid](*args, **meta, **_FP_OPTS)
    finally:
        if saved is None:
            os.environ.pop("TRITON_ALWAYS_COMPILE", None)
        else:
            os.environ["TRITON_ALWAYS_COMPILE"] = saved


def usable(out: torch.Tensor | float, ref: torch.Tensor, ref64: torch.Tensor) -> bool:
    """Whether these tensors take the fused path: CUDA, float dtypes, at least one element."""
    tensors = [ref, ref64] + ([] if isinstance(out, (int, float)) else [out])
    return (all(type(x) is torch.Tensor and x.is_cuda and x.dtype in SUPPORTED for x in tensors)
            and ref.numel() > 0 and ref64.device == ref.device and ref64.numel() == ref.numel())


def check(out: torch.Tensor | None, ref: torch.Tensor, ref64: torch.Tensor, atol: float, rtol: float, floor: float,
          value: float) -> dict[str, float]:
    """compare.py's two passes over flat CUDA tensors ``out`` (or the constant ``value`` when ``out`` is
    None), ``ref`` (the problem dtype) and ``ref64`` (the truth); one host sync. Returns the slack, the
    counts, the three squared norms and the two maxima."""
    n = ref.numel()
    n_blocks = triton.cdiv(n, BLOCK)
    grid = (n_blocks,)
    round_truth = ref.dtype != torch.float64
    device = ref.device
    if round_truth:
        worst_parts = torch.empty(n_blocks, dtype=torch.float64, device=device)
        _launch(_worst_kernel, grid, (ref, ref64, worst_parts, n), BLOCK=BLOCK, ROUND=True)
        slack = 2.0 * worst_parts.max()
    else:
        slack = torch.zeros((), dtype=torch.float64, device=device)
    params = torch.tensor([atol, rtol, atol, floor, value], dtype=torch.float64).to(device)
    params[2] += slack  # atol + slack, the truth test's absolute bound (float64, as the torch path adds it)
    fparts = torch.empty((5, n_blocks), dtype=torch.float64, device=device)
    iparts = torch.empty((2, n_blocks), dtype=torch.int64, device=device)
    constant = out is None
    o = ref if constant else out
    _launch(_check_kernel, grid, (o, ref, ref64, params, fparts, iparts, n, n_blocks),
            BLOCK=BLOCK, CONSTANT=constant, ROUND=round_truth)
    sums = fparts[:3].sum(dim=1)
    maxima = fparts[3:].amax(dim=1)
    counts = iparts.sum(dim=1).double()
    err_sq, ref_sq, ref_err_sq, max_abs, max_rel, mismatched, unwritten, slack_v = torch.cat(
        [sums, maxima, counts, slack.reshape(1)]).tolist()
    return {"slack": slack_v, "err_sq": err_sq, "ref_sq": ref_sq, "ref_err_sq": ref_err_sq, "max_abs": max_abs,
            "max_rel": max_rel, "mismatched": int(mismatched), "unwritten": int(unwritten)}


def replay_sums(cand: torch.Tensor, eager: torch.Tensor, atol: float, rtol: float) -> list[float] | None:
    """compare.replay_difference's four sums over flat CUDA float tensors in one pass and one host sync (the
    torch path ran some 15 float64 kernels per 16M-element chunk: 64 ms per timed output of 1 GiB on an H100,
    nine per benchmark); None when these tensors do not take the fused path."""
    tensors = (cand, eager)
    if not all(type(x) is torch.Tensor and x.is_cuda and x.dtype in SUPPORTED for x in tensors) \
            or cand.numel() != eager.numel() or eager.numel() == 0 or cand.device != eager.device:
        return None
    return replay_parts(cand, eager, atol, rtol)


def replay_parts(cand: torch.Tensor, eager: torch.Tensor, atol: float, rtol: float) -> list[float]:
    """The four sums of ``replay_sums`` for flat float tensors of one size and device (no check of either)."""
    n = eager.numel()
    n_blocks = triton.cdiv(n, BLOCK)
    params = torch.tensor([atol, rtol], dtype=torch.float64).to(eager.device)
    parts = torch.empty((4, n_blocks), dtype=torch.float64, device=eager.device)
    _launch(_replay_kernel, (n_blocks,), (cand, eager, params, parts, n, n_blocks), BLOCK=BLOCK)
    return parts.sum(dim=1).tolist()


def warm(dtype: torch.dtype, device: str) -> None:
    """Compile this dtype's kernels now (the worker's ``prepare``, while the candidate builds): on a cold worker
    their first compile was part of the first verdict's verification."""
    if dtype not in SUPPORTED or not str(device).startswith("cuda"):
        return
    ref = torch.zeros(BLOCK + 3, dtype=dtype, device=device)
    truth = ref.double()
    check(ref, ref, truth, 1e-3, 1e-3, 1e-3, 0.0)
    check(None, ref, truth, 1e-3, 1e-3, 1e-3, 0.5)  # the constant output of the trivial-output guard
    replay_parts(ref, ref, 1e-3, 1e-3)
