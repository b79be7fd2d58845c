"""Speed of light: the roofline time of a problem at this GPU's measured ceilings (pure Python).

floor_ms = max(bytes_moved / copy bandwidth, flops / matmul rate for the problem dtype). ``bytes_moved``
and ``flops`` come from the problem analysis (inputs + parameters read once, outputs written once;
torch's flop counter). The bound that sets the floor names the problem memory- or compute-bound.

Flags (shown in the verdict, never hidden, never a rejection on their own):
- the candidate is faster than the roofline allows (below floor / (1 + 5%));
- the candidate is more than 10x faster than torch.compile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.verdict import ROOFLINE_MARGIN, SpeedOfLight

if TYPE_CHECKING:
    from kernelpilot.evaluation.timing.ceilings import Ceilings
    from kernelpilot.evaluation.worker.global_state import Snapshot

SUSPICIOUS_SPEEDUP_VS_COMPILE = 10.0


def roofline(bytes_moved: int | None, flops: int | None, copy_tbps: float | None,
             tflops: float | None) -> tuple[float | None, str]:
    """(floor in ms, "memory" | "compute" | "unknown")."""
    mem_ms = bytes_moved / (copy_tbps * 1e12) * 1e3 if bytes_moved and copy_tbps else None
    cmp_ms = flops / (tflops * 1e12) * 1e3 if flops and tflops else None
    if mem_ms is None and cmp_ms is None:
        return None, "unknown"
    if cmp_ms is None or (mem_ms is not None and mem_ms >= cmp_ms):
        return mem_ms, "memory"
    return cmp_ms, "compute"


def _pct(floor_ms: float | None, ms: float | None) -> float | None:
    if floor_ms is None or not ms or ms <= 0:
        return None
    return 100.0 * floor_ms / ms


def speed_of_light(*, bytes_moved: int | None, flops: int | None, copy_tbps: float | None,
                   tflops: float | None, candidate_ms: float | None, compiled_ms: float | None,
                   source: str = "") -> SpeedOfLight:
    floor_ms, bound = roofline(bytes_moved, flops, copy_tbps, tflops)
    sol = SpeedOfLight(bytes_moved=bytes_moved, flops=flops, bound=bound, floor_ms=floor_ms,  # type: ignore[arg-type]
                       ceiling_tbps=copy_tbps, ceiling_tflops=tflops, ceiling_source=source)
    if candidate_ms and candidate_ms > 0:
        if bytes_moved:
            sol.achieved_tbps = bytes_moved / (candidate_ms * 1e-3) / 1e12
        if flops:
            sol.achieved_tflops = flops / (candidate_ms * 1e-3) / 1e12
    sol.pct_of_ceiling = _pct(floor_ms, candidate_ms)
    sol.compiled_pct_of_ceiling = _pct(floor_ms, compiled_ms)
    return sol


def for_problem(info: dict[str, Any], dtype: str, ceil: Ceilings, state: Snapshot | None, *, candidate_ms: float | None,
                compiled_ms: float | None) -> SpeedOfLight:
    """The speed of light of a problem (``info``: bytes_moved, flops, flops_by_op from the analysis) at the
    ceilings ``ceil``, its flops at the rates torch's switches in ``state`` (the problem's default global
    state: ``cudnn_allow_tf32``, ``matmul_allow_tf32``) let its operators run at."""
    rate, assumes = ceil.compute_rate(dtype.replace("torch.", ""), info.get("flops_by_op"),
                                      conv_tf32=bool(getattr(state, "cudnn_allow_tf32", False)),
                                      matmul_tf32=bool(getattr(state, "matmul_allow_tf32", False)))
    source = ceil.source() + (f"; {assumes}" if assumes else "")
    return speed_of_light(bytes_moved=info.get("bytes_moved"), flops=info.get("flops"), copy_tbps=ceil.copy_tbps,
                          tflops=rate, candidate_ms=candidate_ms, compiled_ms=compiled_ms, source=source)


def suspicion_flags(sol: SpeedOfLight, candidate_ms: float | None, speedup_vs_compile: float | None) -> list[str]:
    flags = []
    if sol.floor_ms and candidate_ms and candidate_ms * (1 + ROOFLINE_MARGIN) < sol.floor_ms:
        flags.append(f"suspicious: {candidate_ms:.4g} ms is faster than the {sol.bound} roofline allows "
                     f"({sol.floor_ms:.4g} ms at {sol.ceiling_source or 'the measured ceilings'}); "
                     "check that all the work is done and timed, and that it computes in the problem's precision")
    if speedup_vs_compile is not None and speedup_vs_compile > SUSPICIOUS_SPEEDUP_VS_COMPILE:
        flags.append(f"suspicious: {speedup_vs_compile:.1f}x faster than torch.compile (more than "
                     f"{SUSPICIOUS_SPEEDUP_VS_COMPILE:.0f}x); check for skipped work or a weak baseline")
    return flags
