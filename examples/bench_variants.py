#!/usr/bin/env python3
"""Time candidate directories of one example side by side, in one process: an A/B of kernel variants.

    python examples/bench_variants.py layernorm examples/layernorm/candidate /tmp/layernorm_v2 \\
        --ns 4096,65536,262144 --dtypes bf16,fp32

Each directory is a candidate of the example (``model_new.py`` with ``ModelNew``, built like any
candidate). For every N and dtype (1 GiB of input, as in bench_sweep.py) every variant is checked
against the float64 Model and then timed with the engine's method, twice, in alternating order, and
the better of its two medians is kept, so a variant never profits from running first. Prints one line
per case (TB/s per variant, "wrong" for an incorrect output) and, with $OUT set, writes
$OUT/variants.txt. The A/B files ab/5-ab/10 under examples/results/2026-12-01/ are its output on the
H200 (ab/1-ab/4 came from an ad-hoc copy of the same loop); the variants it compared are patches in
ab/variants/.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

from bench_sweep import COPY_TBPS, candidate_model, reference_models  # noqa: E402
from sweep_cases import memory_bound_case  # noqa: E402
from sweep_measure import check, time_ms, to64  # noqa: E402


def case_line(op: str, dname: str, n: int, variants: list[Path], flush: object) -> str:
    import torch

    shape, init, make_inputs, (_, nbytes) = memory_bound_case(op, n, dname)
    model, model64, inputs = reference_models(op, init, make_inputs, 0, dname)
    with torch.no_grad():
        ref, ref64 = model(*inputs), model64(*[to64(x) for x in inputs])
    best: dict[str, float | str] = {}
    for round_ in range(2):
        for index, directory in (enumerate(variants) if round_ == 0 else reversed(list(enumerate(variants)))):
            label = f"{directory.parent.name}/{directory.name}" if directory.name == "candidate" else directory.name
            if label in best and isinstance(best[label], str) and best[label] != "wrong":
                continue  # it failed in the first round
            try:
                new = candidate_model(directory / "model_new.py", f"variant_{op}_{index}", init, model, dname)
                with torch.no_grad():
                    ok = check(new(*inputs), ref, ref64)[0]
                    ms = time_ms(lambda new=new, args=inputs: new(*args), flush)[0]
                rate = nbytes / (ms * 1e-3) / 1e12
                prev = best.get(label, 0.0)
                if not ok or prev == "wrong":
                    best[label] = "wrong"
                elif isinstance(prev, float):
                    best[label] = max(rate, prev)
            except Exception as exc:  # noqa: BLE001 - a variant that fails is reported, the others go on
                best[label] = f"{type(exc).__name__}: {str(exc)[:80]}"
    del model, model64, inputs, ref, ref64
    torch.cuda.empty_cache()
    cells = "  ".join(f"{k} {v:.2f} ({100 * v / COPY_TBPS:.0f}%)" if isinstance(v, float) else f"{k} {v}"
                      for k, v in best.items())
    return f"{op:14s} {dname} {n:7d} {shape:12s} {cells}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("op", choices=("softmax", "rmsnorm", "layernorm", "cross_entropy"))
    parser.add_argument("variants", nargs="+", type=Path, help="candidate directories of that example")
    parser.add_argument("--ns", default="4096,16384,65536,131072,262144")
    parser.add_argument("--dtypes", default="bf16,fp32")
    args = parser.parse_args(argv)
    missing = [str(d) for d in args.variants if not (d / "model_new.py").is_file()]
    if missing:
        print(f"bench_variants.py: no model_new.py in {', '.join(missing)}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("bench_variants.py needs a CUDA GPU.", file=sys.stderr)
        return 2
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    lines = []
    for dname in args.dtypes.split(","):
        for n in (int(x) for x in args.ns.split(",")):
            lines.append(case_line(args.op, dname, n, [d.resolve() for d in args.variants], flush))
            print(lines[-1], flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "variants.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
