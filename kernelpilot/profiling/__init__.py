"""Where the time goes: Nsight Compute (or torch.profiler) summaries, roofline, sanitizer, hotspots.

``profile_candidate(problem, candidate)`` profiles the candidate's kernels and the torch.compile
baseline's kernels in one confined run and returns a :class:`ProfileSummary` whose ``text()`` is at
most 40 lines for the model; ``to_dict()`` keeps every metric for the engineer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.profiling.diagnosis import diagnose, findings
from kernelpilot.profiling.ncu import BASELINE_RANGE, CANDIDATE_RANGE, KernelProfile, build_command, ncu_path, parse_csv
from kernelpilot.profiling.roofline import Roofline
from kernelpilot.profiling.runner import run_sandboxed

MAX_LINES = 40


@dataclass
class ProfileSummary:
    source: str  # "ncu" or "torch.profiler"
    candidate: list[KernelProfile] = field(default_factory=list)
    baseline: list[KernelProfile] = field(default_factory=list)
    roofline: Roofline | None = None
    notes: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "candidate": [k.to_dict() for k in self.candidate],
            "baseline": [k.to_dict() for k in self.baseline],
            "roofline": self.roofline.to_dict() if self.roofline else None,
            "notes": self.notes,
            "error": self.error,
            "seconds": self.seconds,
        }

    def text(self) -> str:
        """The model-facing summary, at most 40 lines."""
        lines = self._lines(full=False)
        if len(lines) > MAX_LINES:
            lines = lines[: MAX_LINES - 1] + [f"[… {len(lines) - MAX_LINES + 1} more lines: ask for the full profile]"]
        return "\n".join(lines)

    def full_text(self) -> str:
        """Every kernel line, the baseline's in the same detail as the candidate's (for the engineer)."""
        return "\n".join(self._lines(full=True))

    def _lines(self, *, full: bool) -> list[str]:
        if self.error:
            return [f"profile failed ({self.source}): {self.error}"]
        lines = [f"profile source: {self.source}"
                 + (" (Nsight Compute, clocks as found)" if self.source == "ncu"
                    else " (kernel times only: ncu unavailable)")]
        every = max(len(self.candidate), len(self.baseline)) if full else None
        lines += _kernel_lines("candidate", self.candidate, detailed=True, top=every)
        lines += _kernel_lines("torch.compile baseline", self.baseline, detailed=full, top=every)
        if self.roofline is not None:
            lines += self.roofline.text().splitlines()
        lines += [f"note: {n}" for n in self.notes]
        return lines


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _kernel_lines(title: str, kernels: list[KernelProfile], *, detailed: bool, top: int | None = None) -> list[str]:
    if not kernels:
        return [f"{title}: no kernels captured"]
    total = sum(k.duration_us or 0.0 for k in kernels)
    lines = [f"{title}: {len(kernels)} kernel(s), {total:.1f} µs per call"]
    limit = top if top is not None else (4 if detailed else 2)
    for k in sorted(kernels, key=lambda k: k.duration_us or 0.0, reverse=True)[:limit]:
        lines.append(f"  {_short(k.name)}: {k.duration_us or 0:.1f} µs")
        if k.dram_pct_of_peak is None:  # torch.profiler source: times only
            continue
        lines.append(
            f"    DRAM {k.dram_pct_of_peak:.0f}% of peak, SM {k.sm_pct_of_peak or 0:.0f}%, "
            f"occupancy {k.achieved_occupancy_pct or 0:.0f}% (theoretical {k.theoretical_occupancy_pct or 0:.0f}%), "
            f"L2 hit {k.l2_hit_pct or 0:.0f}%"
        )
        if detailed:
            lines.append(
                f"    {k.registers_per_thread} regs/thread, {k.shared_bytes_per_block} B smem/block, "
                f"block {k.block_size} x grid {k.grid_size}; bytes/sector ld {k.load_bytes_per_sector or 0:.0f}/32 "
                f"st {k.store_bytes_per_sector or 0:.0f}/32"
            )
            stalls = ", ".join(f"{r.replace('_', '-')} {v:.1f}" for r, v in k.top_stalls(3))
            if stalls:
                lines.append(f"    top stalls (warps per issue): {stalls}")
            lines.append(f"    diagnosis: {diagnose(k)}")
            lines += [f"    also: {f}" for f in findings(k)[1:3]]
    return lines


def _split(kernels: list[KernelProfile]) -> tuple[list[KernelProfile], list[KernelProfile]]:
    return (
        [k for k in kernels if k.nvtx_range == CANDIDATE_RANGE],
        [k for k in kernels if k.nvtx_range == BASELINE_RANGE],
    )


def _per_call(kernels: list[KernelProfile], iters: int) -> list[KernelProfile]:
    """ncu averages each kernel over its launches; scale to per forward call."""
    for k in kernels:
        per_call = k.launches / iters
        if k.duration_us is not None and per_call > 1:
            k.duration_us *= per_call
    return kernels


def profile_candidate(
    problem: Path,
    candidate: Path,
    *,
    roofline: Roofline | None = None,
    iters: int = 2,
    timeout_s: float = 300,
    use_ncu: bool | None = None,
    env: dict[str, str] | None = None,
) -> ProfileSummary:
    """Profile the candidate's kernels and the torch.compile baseline's, confined, with a timeout."""
    start = time.monotonic()
    target = [sys.executable, "-m", "kernelpilot.profiling.target", "--problem", str(problem),
              "--candidate", str(candidate), "--iters", str(iters)]
    ncu = ncu_path() if use_ncu is not False else None
    writable = [candidate.parent if candidate.is_file() else candidate]
    summary: ProfileSummary
    try:
        if ncu:
            cmd = build_command(target, ncu=ncu, launch_count=64)
            proc = run_sandboxed(cmd, timeout_s=timeout_s, extra_env=env, writable=writable)
            kernels = parse_csv(proc.stdout)
            if kernels:
                cand, base = _split(kernels)
                summary = ProfileSummary("ncu", _per_call(cand, iters), _per_call(base, iters), roofline)
            else:
                reason = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                summary = _torch_profile(target, timeout_s, env, writable, roofline)
                summary.notes.append("ncu captured no kernels (" + " | ".join(reason)
                                     + "); fell back to torch.profiler")
        else:
            summary = _torch_profile(target, timeout_s, env, writable, roofline)
            summary.notes.append("ncu not found: kernel times from torch.profiler, no hardware counters")
    except subprocess.TimeoutExpired:
        summary = ProfileSummary("ncu" if ncu else "torch.profiler", error=f"timed out after {timeout_s:.0f} s")
    summary.seconds = time.monotonic() - start
    return summary


def _torch_profile(
    target: list[str], timeout_s: float, env: dict[str, str] | None, writable: list[Path], roofline: Roofline | None
) -> ProfileSummary:
    out = Path(tempfile.mkdtemp(prefix="kp-torchprof-")) / "kernels.json"
    proc = run_sandboxed(target + ["--torch-profiler", str(out)], timeout_s=timeout_s, extra_env=env,
                         writable=[*writable, out.parent])
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip()[-500:]
        return ProfileSummary("torch.profiler", error=f"the profiled program failed (exit {proc.returncode}): {tail}")
    tables = json.loads(out.read_text())

    def profiles(rng: str) -> list[KernelProfile]:
        return [KernelProfile(name=r["name"], nvtx_range=rng, launches=max(1, round(r["launches"])),
                              duration_us=r["us_per_call"]) for r in tables.get(rng, [])]

    return ProfileSummary("torch.profiler", profiles(CANDIDATE_RANGE), profiles(BASELINE_RANGE), roofline)
