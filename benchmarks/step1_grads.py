"""Which gradient moves the loss after the first optimizer step: a swap's gradients against the unmodified run's, per
parameter, beside what `apply`'s one-ulp sensitivity run moves (issue 52: in eager on 2026-12-07 the head+loss swap's
loss was outside the band at step 1 alone, 3.7e-04 against 1.2e-04; its gradients' worst normalised difference,
4.8e-03, was inside the sensitivity run's 8.7e-03).

    cd REPO && python benchmarks/step1_grads.py --kernels problems --only head_loss --out step1.json train.py

Three runs of two steps each, as `kernelpilot apply` makes them (``apply_run.measure``, eager, seed 0): the script as
it is, with the drop-ins whose folder name contains ``--only`` swapped in, and the sensitivity run (nothing swapped,
the parts' outputs and the gradients their backward returns moved by up to one ulp). Per parameter, each run against
the unmodified one: the normalised difference, the share of elements that differ, the largest difference in ulps of
the unmodified value, the signs flipped, and how far AdamW's first update moves (its direction ``g / (|g| + eps)``
once bias-corrected: the normalised difference of that). Prints the parameters whose first update moves most.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def compare(a: Any, b: Any, dtype: Any, eps: float, device: str) -> dict[str, float]:
    """``a`` against ``b`` (the unmodified run's gradient of one parameter), on ``device`` in float64."""
    import torch

    from kernelpilot.dropin.apply_perturb import _ulp  # the one-ulp run's own ulp

    x, y = a.to(device).double(), b.to(device).double()
    d = x - y
    ulp = _ulp(b.to(device).float(), dtype).double()
    nonzero = y != 0
    ulps = (d.abs()[nonzero] / ulp[nonzero]).max().item() if bool(nonzero.any()) else 0.0
    ux, uy = x / (x.abs() + eps), y / (y.abs() + eps)
    norm = float(torch.linalg.vector_norm(y)) or 1.0
    unorm = float(torch.linalg.vector_norm(uy)) or 1.0
    return {"rel": float(torch.linalg.vector_norm(d)) / norm, "differ": float((d != 0).double().mean()),
            "max_ulps": ulps, "flips": int(((x * y) < 0).sum() + ((x == 0) ^ (y == 0)).sum()),
            "adam1": float(torch.linalg.vector_norm(ux - uy)) / unorm, "numel": y.numel()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default="problems")
    parser.add_argument("--only", default="", help="swap only the drop-ins whose folder name contains this")
    parser.add_argument("--eps", type=float, default=1e-8, help="the optimizer's eps (AdamW's default)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--out", default="step1_grads.json")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    import torch

    from kernelpilot.dropin.apply_command import find_dropins
    from kernelpilot.dropin.apply_run import measure
    from kernelpilot.dropin.apply_swaps import swap_paths

    script = Path(args.script).resolve()
    dropins = [d for d in find_dropins(Path(args.kernels), script) if args.only in d.parent.parent.name]
    if not dropins:
        sys.exit(f"no approved drop-in under {args.kernels} matches --only {args.only!r}")
    paths = list(dict.fromkeys(p for d in dropins for p in swap_paths(d)))
    common = {"steps": 2, "warmup": 0}  # the gradients of the first step; the loss of the second
    runs = {"as it is": measure(script, args.args, dropins=[], swap=False, **common),
            "swapped": measure(script, args.args, dropins=dropins, **common),
            "one-ulp": measure(script, args.args, dropins=[], perturb=paths, perturb_grads=dropins, **common)}
    for name, run in runs.items():
        if run.error or not run.grads:
            sys.exit(f"{name}: {run.error or 'no gradients recorded'}")
    base = runs["as it is"].grads
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = {}
    for name in sorted(base):
        ref = base[name]
        rows[name] = {kind: compare(runs[kind].grads[name], ref, ref.dtype, args.eps, device)
                      for kind in ("swapped", "one-ulp")}
    losses = {k: r.losses for k, r in runs.items()}
    Path(args.out).write_text(json.dumps({"dropins": [str(d) for d in dropins], "losses": losses, "params": rows},
                                         indent=1) + "\n")
    print("loss at steps 0 and 1: " + "; ".join(f"{k} {v}" for k, v in losses.items()))
    print(f"{'parameter':<48}{'numel':>11} | swapped: {'rel':>8}{'differ':>8}{'ulps':>7}{'flips':>8}{'adam1':>9}"
          f" | one-ulp: {'rel':>8}{'flips':>8}{'adam1':>9}")
    order = sorted(rows, key=lambda n: -rows[n]["swapped"]["adam1"])
    for name in order[:args.top]:
        s, u = rows[name]["swapped"], rows[name]["one-ulp"]
        print(f"{name[-48:]:<48}{s['numel']:>11} | {s['rel']:>17.1e}{s['differ']:>8.3f}{s['max_ulps']:>7.0f}"
              f"{s['flips']:>8}{s['adam1']:>9.1e} | {u['rel']:>17.1e}{u['flips']:>8}{u['adam1']:>9.1e}")
    worse = [n for n in rows if rows[n]["swapped"]["adam1"] > 2 * rows[n]["one-ulp"]["adam1"]]
    print(f"{len(worse)} of {len(rows)} parameters: the swap moves AdamW's first update more than twice as far as the "
          f"one-ulp run" + (f" (first: {', '.join(worse[:5])})" if worse else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
