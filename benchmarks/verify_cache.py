"""The verify phase of one warm worker, first edit vs the next ones, with the reference cache
(kernelpilot/evaluation/correctness/reference_cache.py) and without it (``KERNELPILOT_REFERENCE_CACHE_BYTES=0``).

    python benchmarks/verify_cache.py [--device cpu|cuda] [--edits 3] [--trials 5]

Each problem is evaluated ``--edits`` times in test mode by one in-process ``Worker`` (the worker's own
code, no subprocess), with a PyTorch candidate equal to the reference; the table gives the worker's
``verify`` phase per edit, the trials served from the cache, and the time spent in
``verify.reference_outputs`` (the dtype model and its float64 copy, wrapped here; the dtype call a
reference-first trial still makes on a hit is not in that column, it is in the verify phase).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROBLEMS = {
    "softmax 512x4096": ("torch.softmax(x, dim=-1)", "[torch.randn(512, 4096)]", "x"),
    "matmul 384^3": ("x @ w", "[torch.randn(384, 384), torch.randn(384, 384)]", "x, w"),
}


def _files(directory: Path, name: str) -> tuple[Path, Path]:
    body, inputs, args = PROBLEMS[name]
    head = "import torch\nimport torch.nn as nn\n\n"
    problem = directory / "problem.py"
    problem.write_text(head + f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {body}\n\n"
                       f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return []\n")
    cand = directory / "model_new.py"
    cand.write_text(head + f"class ModelNew(nn.Module):\n    def forward(self, {args}):\n        return {body}\n")
    return problem, cand


def _run(name: str, device: str, edits: int, trials: int, cached: bool) -> list[dict[str, Any]]:
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.correctness import reference_cache as rc
    from kernelpilot.evaluation.correctness import verify
    from kernelpilot.evaluation.worker.main import Worker

    if cached:
        os.environ.pop(rc.ENV, None)
    else:
        os.environ[rc.ENV] = "0"
    spent = [0.0]
    original = verify.reference_outputs

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t0

    verify.reference_outputs = timed  # what TrialReference computes with (passed in by verify())
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            problem, cand = _files(Path(tmp), name)
            settings = EvalSettings(device=device, confine=False, trials=trials).to_dict()
            msg = {"op": "evaluate", "problem": str(problem), "candidate_model": str(cand), "candidate_dir": tmp,
                   "mode": "test", "settings": settings, "own_kernels": [], "kind": "pytorch"}
            worker = Worker(device)
            for edit in range(1, edits + 1):
                spent[0] = 0.0
                verdict = worker.evaluate(msg)["verdict"]
                corr = verdict["correctness"]
                rows.append({"problem": name, "cache": "on" if cached else "off", "edit": edit,
                             "verify_s": verdict["phases"].get("verify", 0.0), "reference_s": round(spent[0], 3),
                             "cached": f"{corr['references_cached']}/{len(corr['trials'])}",
                             "passed": corr["passed"]})
    finally:
        verify.reference_outputs = original
        os.environ.pop(rc.ENV, None)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    import torch

    print(f"# verify phase per edit, {args.device}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}, "
          f"{args.trials} trials, {os.cpu_count()} CPUs", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for name in PROBLEMS:
        for cached in (False, True):
            rows += _run(name, args.device, args.edits, args.trials, cached)
    print("| problem | cache | edit | verify s | reference calls s | trials from cache | passed |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['problem']} | {r['cache']} | {r['edit']} | {r['verify_s']:.2f} | {r['reference_s']:.2f} | "
              f"{r['cached']} | {r['passed']} |")
    import statistics

    print("\n| problem | cache | first edit verify s | later edits verify s (median) | reference calls s (first / later) |")
    print("|---|---|---|---|---|")
    for name in PROBLEMS:
        for cache in ("off", "on"):
            mine = [r for r in rows if r["problem"] == name and r["cache"] == cache]
            later = mine[1:] or mine
            print(f"| {name} | {cache} | {mine[0]['verify_s']:.2f} | "
                  f"{statistics.median(r['verify_s'] for r in later):.2f} | {mine[0]['reference_s']:.2f} / "
                  f"{statistics.median(r['reference_s'] for r in later):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
