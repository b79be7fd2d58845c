"""What the worker's tidy-up after a verdict costs the next one, on this machine (no GPU needed).

The worker answers, then collects garbage and restores torch's state (worker/main.py ``tidy``) before it reads the
next request. An edit saved at once after a verdict waits for that. This evaluates one plain-PyTorch candidate in
CPU test mode (the real worker process, the policy, the verification; the default rules reject it afterwards for
having no kernel of its own), ``--runs`` times at once after the previous
verdict and ``--runs`` times after a pause, and prints the medians: their difference is the tidy-up's delay.

    python benchmarks/tidy_cost.py [--runs 7] [--pause-s 1.5] [--json OUT]

Run it on two trees (PYTHONPATH=TREE) to compare an engine change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cpu"


def _verified(v: object) -> bool:
    """The candidate was verified and passed (the default rules then reject it for having no kernel of its own:
    the verification, what this measures, ran all the same)."""
    c = getattr(v, "correctness", None)
    return c is not None and bool(c.passed)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pause-s", type=float, default=1.5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from kernelpilot.evaluation import EvalSettings, Evaluator

    with tempfile.TemporaryDirectory() as tmp:
        ev = Evaluator(EvalSettings(device="cpu", confine=False, build_dir=Path(tmp) / "builds"))
        try:
            first = ev.evaluate(DATA / "scaled_add.py", DATA / "good.py", "test")  # the worker's start
            assert _verified(first), first.error
            client = getattr(ev, "_client", None)
            walls: dict[str, list[float]] = {"at once": [], "after a pause": []}
            for _ in range(args.runs):
                for kind in ("at once", "after a pause"):
                    if kind == "after a pause":
                        time.sleep(args.pause_s)
                    t0 = time.monotonic()
                    v = ev.evaluate(DATA / "scaled_add.py", DATA / "good.py", "test")
                    walls[kind].append(time.monotonic() - t0)
                    assert _verified(v), v.error
            frozen = getattr(client, "heap_frozen", None)
        finally:
            ev.close()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {"commit": commit, "engine": str(Path(sys.modules["kernelpilot"].__file__).parent),
           "heap_frozen": frozen, **{k: {"median_s": round(statistics.median(w), 3), "runs": [round(x, 3) for x in w]}
                                     for k, w in walls.items()}}
    out["tidy_delay_s"] = round(out["at once"]["median_s"] - out["after a pause"]["median_s"], 3)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
