#!/usr/bin/env python3
"""Turn the verdicts of `kernelpilot eval --json` into the table of examples/RESULTS.md.

    python examples/results_table.py examples/results/2026-11-30

Each ``<example>.json`` in the directory is one verdict, as `kernelpilot eval
examples/<example>/problem.py examples/<example>/candidate --json` printed it on the GPU.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

REFERENCE_COPY_TBPS = 4.25  # device-to-device copy on our H200 (h200-measured.md), the goal's yardstick
MEMORY_BOUND = ("softmax", "rmsnorm", "layernorm", "cross_entropy")
ORDER = (*MEMORY_BOUND, "residual_rmsnorm_gate", "gemm_bias_gelu", "diag_matmul", "linear_sum_scale")


def _ms(timing: dict | None) -> str:
    return f"{timing['median_ms']:.3f}" if timing else "-"


def _spread(timing: dict | None) -> str:
    return f"{timing['q1_ms']:.3f}–{timing['q3_ms']:.3f}" if timing else "-"


def row(name: str, v: dict) -> str:
    p, s = v.get("performance") or {}, v.get("speed_of_light") or {}
    cand = p.get("candidate")
    if s.get("bound") == "memory" or s.get("achieved_tflops") is None:
        achieved = f"{s['achieved_tbps']:.2f} TB/s" if s.get("achieved_tbps") else "-"
    elif s.get("pct_of_ceiling", 0) > 100:  # an algebraic rewrite: less work than the problem states
        achieved = f"{s['achieved_tbps']:.2f} TB/s (bytes)"
    else:
        achieved = f"{s['achieved_tflops']:.0f} TFLOP/s"
    if s.get("pct_of_ceiling") is None:
        pct = "-"
    elif s["pct_of_ceiling"] > 150:
        pct = f"{100 * s['achieved_tbps'] / s['ceiling_tbps']:.0f}% of copy (rewrite)"
    else:
        pct = f"{s['pct_of_ceiling']:.0f}%"
    of_ref = f"{100 * s['achieved_tbps'] / REFERENCE_COPY_TBPS:.0f}%" if s.get("achieved_tbps") and (
        s.get("bound") == "memory" or s.get("pct_of_ceiling", 0) > 150) else "-"
    x = lambda key: f"{p[key]:.2f}x" if p.get(key) else "-"  # noqa: E731
    flags = "; ".join(f["rule"] for f in v.get("findings") or []) or ""
    return (f"| {name} | {v['status']} | {_ms(p.get('eager'))} | {_ms(p.get('compiled'))} | {_ms(cand)} "
            f"({_spread(cand)}) | {x('speedup_vs_eager')} | {x('speedup_vs_compile')} | {achieved} | {pct} | "
            f"{s.get('ceiling_tbps', 0):.2f} | {of_ref} | {flags} |")


def main(argv: list[str]) -> int:
    directory = Path(argv[1] if len(argv) > 1 else "examples/results")
    verdicts = {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}
    names = [n for n in ORDER if n in verdicts] + sorted(set(verdicts) - set(ORDER))
    print("| example | verdict | eager ms | torch.compile ms | candidate ms (IQR) | x eager | x compile | achieved "
          "| % of ceiling | copy ceiling TB/s | % of 4.25 TB/s | findings |")
    print("|" + "---|" * 12)
    for name in names:
        print(row(name, verdicts[name]))
    speedups = [verdicts[n]["performance"]["speedup_vs_compile"] for n in MEMORY_BOUND
                if n in verdicts and (verdicts[n].get("performance") or {}).get("speedup_vs_compile")]
    if speedups:
        geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
        print(f"\ngeomean x vs torch.compile, memory-bound four at their default shapes: {geo:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
