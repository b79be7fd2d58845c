"""``kernelpilot profile PROBLEM CANDIDATE``: where the candidate's time goes, next to torch.compile's.

Runs the same confined profile the agent's ``profile`` tool runs (Nsight Compute when it is installed
and permitted, torch.profiler otherwise) and prints the summary: per kernel duration, DRAM and SM
throughput, occupancy, registers, stalls, sector efficiency, L2 hit rate and a one-line diagnosis,
for the candidate and for the baseline. ``--verdict FILE`` (from ``kernelpilot eval --json``) adds the
roofline; ``--json`` prints every metric.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling import profile_candidate
from kernelpilot.profiling.roofline import roofline_from_verdict


def _roofline(path: str | None) -> object | None:
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KernelpilotError(f"cannot read the verdict {path} ({exc}); pass the JSON that `kernelpilot eval --json` "
                               "prints, or leave out --verdict.") from None
    roofline = roofline_from_verdict(data)
    if roofline is None:
        print(f"kernelpilot: {path} has no speed of light (not a benchmark verdict?); profiling without a roofline.",
              file=sys.stderr)
    return roofline


def profile_command(args: argparse.Namespace) -> int:
    use_ncu = False if getattr(args, "no_ncu", False) else None
    summary = profile_candidate(Path(args.problem), Path(args.candidate), roofline=_roofline(args.verdict),
                                iters=args.iters, timeout_s=args.timeout or 300, use_ncu=use_ncu)
    if args.json:
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write((summary.full_text() if args.full else summary.text()) + "\n")
    return 1 if summary.error else 0
