"""Record torch.compile's output for every KernelBench problem on the GPU, one fresh process each.

A problem already recorded (successfully) in --out is not recorded again: run the same command again after a
killed call and it does what is left.

    python benchmarks/kb_record.py --kernelbench KB --out DIR [--jobs 12] [--budget-gb 110] [--levels 1,2,3]

For each problem of levels 1-3 of a KernelBench checkout, ``python -m kernelpilot.inductor.generate``
runs ``torch.compile(Model(*init))(*inputs)`` in a process of its own (default mode, graph breaks
allowed) and prints Inductor's code, the launch configs its autotuner chose, where each graph input
comes from and the torch runtime helpers the kernels use. This is at once the "does torch.compile
compile it" check of issue 25 (outside our worker) and the recording the Inductor candidate c0 is
converted from (``kernelpilot init --from-inductor KB --recordings DIR --out C0``).

The parallel, memory-budgeted recording is kernelpilot.inductor.batch.record_all (problems sized on
the meta device, a problem starts when its estimate fits what the running ones leave). Writes
DIR/<level>/<problem>.json as each finishes and DIR/index.json; prints a summary last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelpilot.inductor.batch import discover, record_all  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--budget-gb", type=float, default=110.0)
    ap.add_argument("--timeout", type=float, default=400.0)
    ap.add_argument("--done", type=Path, help="a folder of recordings made before: those problems are skipped")
    ap.add_argument("--only", default="", help="comma-separated problem keys (level1/23_Softmax)")
    args = ap.parse_args()
    todo = discover([args.kernelbench], [int(x) for x in args.levels.split(",")])
    if args.only:
        wanted = set(args.only.split(","))
        todo = [t for t in todo if t.key in wanted]
    done = set()
    for folder in [args.out] + ([args.done] if args.done else []):
        done |= {p.relative_to(folder).with_suffix("").as_posix() for p in folder.glob("level*/*.json")}
    todo = [t for t in todo if t.key not in done]
    t0 = time.monotonic()
    known = args.kernelbench / "estimates.json"  # sizes worked out before (on a machine without a GPU)
    sizes = json.loads(known.read_text()) if known.is_file() else {}
    record_all(todo, args.out, jobs=args.jobs, budget_gb=args.budget_gb, timeout=args.timeout,
               sizes={t.key: sizes[t.key] for t in todo if sizes.get(t.key)})
    rows = json.loads((args.out / "index.json").read_text())
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n{len(rows)} problems recorded, wall {time.monotonic() - t0:.0f} s this call: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
