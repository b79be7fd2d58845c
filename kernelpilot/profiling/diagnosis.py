"""Turn a kernel's Nsight Compute metrics into a one-line diagnosis and advice.

The rules follow how an engineer reads a report: which unit is busiest (DRAM or SM) says the bound;
the largest stall reason says why warps wait; sector efficiency and occupancy catch the usual
mistakes. Every rule is a plain function of the metrics, tested on recorded reports.
"""

from __future__ import annotations

from kernelpilot.profiling.ncu import KernelProfile

STALL_ADVICE: dict[str, str] = {
    "long_scoreboard": "waiting on global memory: put more bytes in flight (16-byte loads, several independent loads "
                       "per thread before first use, enough warps)",
    "short_scoreboard": "waiting on shared memory or special-function results: check bank conflicts and MUFU use (exp, "
                        "rsqrt)",
    "mio_throttle": "shared-memory/MIO queue full: fewer and wider shared-memory accesses, fewer shuffles",
    "lg_throttle": "too many global memory instructions: use 16-byte vector accesses",
    "barrier": "warps wait at block barriers: fewer __syncthreads, warp-level reductions, more work per barrier",
    "membar": "memory fences dominate: drop unneeded __threadfence / fence.proxy",
    "wait": "fixed-latency dependencies: unroll for instruction-level parallelism",
    "math_pipe_throttle": "an arithmetic pipe is saturated: this kernel is compute-bound on that pipe",
    "not_selected": "warps are eligible but not picked: the scheduler is busy (usually fine)",
    "selected": "warps are issuing: the kernel is issue-bound; cut instructions (index math, conversions)",
    "dispatch_stall": "dispatch stalls: pipeline conflicts, rarely actionable",
    "drain": "waiting for stores to drain at exit: many outstanding writes at the end",
    "no_instruction": "instruction fetch misses: code too large or divergent branches",
    "branch_resolving": "branch resolution: divergent control flow in hot loops",
    "imc_miss": "constant-cache misses: uniform data read through constant memory varies per thread",
    "sleeping": "warps sleeping (nanosleep / barriers with backoff)",
    "tex_throttle": "texture/L1 pipeline full",
    "gmma": "waiting on wgmma results: deepen the pipeline or overlap epilogue",
}


def bound_of(k: KernelProfile) -> str:
    """'memory-bound', 'compute-bound' or 'latency-bound' from DRAM and SM throughput."""
    dram = k.dram_pct_of_peak or 0.0
    sm = k.sm_pct_of_peak or 0.0
    if max(dram, sm) < 40.0:
        return "latency-bound"
    return "memory-bound" if dram >= sm else "compute-bound"


def findings(k: KernelProfile) -> list[str]:
    """Specific problems worth fixing, most important first."""
    out: list[str] = []
    if k.load_bytes_per_sector is not None and k.load_bytes_per_sector < 16:
        out.append(
            f"uncoalesced loads: {k.load_bytes_per_sector:.0f} of 32 bytes used per sector "
            "(make consecutive threads read consecutive 16-byte chunks)"
        )
    if k.store_bytes_per_sector is not None and k.store_bytes_per_sector < 16:
        out.append(f"uncoalesced stores: {k.store_bytes_per_sector:.0f} of 32 bytes used per sector")
    theo, ach = k.theoretical_occupancy_pct, k.achieved_occupancy_pct
    if theo is not None and theo < 50 and (k.registers_per_thread or 0) > 64:
        out.append(
            f"theoretical occupancy {theo:.0f}% limited by {k.registers_per_thread} registers/thread "
            "(__launch_bounds__ or fewer live values)"
        )
    if theo and ach is not None and ach < 0.6 * theo:
        out.append(
            f"achieved occupancy {ach:.0f}% of {theo:.0f}% possible: load imbalance or a tail "
            "(grid not a multiple of the SM count, or too few blocks)"
        )
    if k.grid_size is not None and k.block_size is not None and k.grid_size < 132:
        out.append(f"only {k.grid_size} blocks for 132 SMs: the grid does not fill the GPU")
    return out


def diagnose(k: KernelProfile) -> str:
    """One line: bound, utilisation, dominant stall and what to do about it."""
    bound = bound_of(k)
    parts = [
        f"{bound} at {k.dram_pct_of_peak or 0:.0f}% of DRAM peak and {k.sm_pct_of_peak or 0:.0f}% of SM peak"
    ]
    top = k.top_stalls(1)
    if top:
        reason, _ = top[0]
        parts.append(f"{reason.replace('_', '-')} stalls dominate: {STALL_ADVICE.get(reason, reason)}")
    problems = findings(k)
    if problems:
        parts.append(problems[0])
    return "; ".join(parts)
