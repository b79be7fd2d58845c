"""Timing and checking for the example sweep (bench_sweep.py): one call timed the way `kernelpilot eval`
times it, and an output judged against the float64 Model with the sweep's tolerances."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any


def time_ms(fn: Callable[[], Any], flush: Any, max_reps: int = 30, budget_ms: float = 300.0) -> tuple[float, float, float]:
    """Median, min and max of single calls, timed the way `kernelpilot eval` times them.

    Per call: L2 flush, full device sync, a GPU spin long enough to cover the host's work for the
    call, then start event, call, end event. The events see GPU execution only, not launch overhead.
    """
    import torch

    from kernelpilot.evaluation.timing.interleaved import times_behind_spin

    fn()  # warm-up (compilation, autotuning, handle creation)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    estimate_ms = max((time.perf_counter() - t0) * 1e3, 1e-3)
    times = times_behind_spin(fn, int(max(5, min(max_reps, budget_ms / estimate_ms))), flush=flush)
    return times[len(times) // 2], times[0], times[-1]


def as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check(outs: Any, refs: Any, refs64: Any) -> tuple[bool, float, float, str]:
    """Elementwise tolerance and normalised error against the float64 Model; max |out - Model|."""
    import torch

    ok, worst_norm, worst_abs, notes = True, 0.0, 0.0, []
    for i, (o, r, r64) in enumerate(zip(as_list(outs), as_list(refs), as_list(refs64), strict=True)):
        if o.shape != r.shape or o.dtype != r.dtype:
            return False, math.inf, math.inf, f"output {i}: {o.dtype}{list(o.shape)} vs {r.dtype}{list(r.shape)}"
        tol = 1e-2 if r.dtype in (torch.bfloat16, torch.float16) else 1e-4
        max_norm = 1e-2 if r.dtype in (torch.bfloat16, torch.float16) else 1e-5
        of, rf, r64f = o.double(), r.double(), r64.double()
        if not torch.isfinite(of).all():
            return False, math.inf, math.inf, f"output {i} has NaN/inf"
        # Elementwise against the float64 run: a reordered sum (linear_sum_scale) legitimately differs
        # from the fp32 Model by more than atol where the result cancels to near zero.
        bad = ((of - r64f).abs() > tol + tol * r64f.abs()).sum().item()
        norm = ((of - r64f).norm() / r64f.norm().clamp_min(1e-30)).item()
        worst_norm, worst_abs = max(worst_norm, norm), max(worst_abs, (of - rf).abs().max().item())
        if bad or norm > max_norm:
            ok = False
            notes.append(f"output {i}: {bad} elements out of tolerance, normalised error {norm:.2e}")
    return ok, worst_norm, worst_abs, "; ".join(notes)


def to64(x: Any) -> Any:
    import torch

    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
