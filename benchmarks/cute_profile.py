"""Nsight Compute on the CuTe RMSNorm beside QuACK's and our CUDA C++ kernel at one shape (issue 53: why bf16
rows of 64K-256K run at 80-88% of the copy ceiling where QuACK runs at 90-99%). Each implementation is called
three times on the sweep's 1 GiB input (the first call compiles); run it under ncu:

    ncu --kernel-name regex:[Rr][Mm][Ss] --launch-skip 0 --launch-count 12 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats \
        python3 benchmarks/cute_profile.py --n 65536 --dtype bf16

and without ncu it prints each one's median time (CUDA events, 20 calls) as a check on the shape."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--time", action="store_true", help="print each implementation's median ms")
    args = ap.parse_args()
    import torch
    from bench_sweep import EXAMPLES, candidate_model, reference_models
    from peers import peer
    from sweep_cases import memory_bound_case

    shape, init, make_inputs, _ = memory_bound_case("rmsnorm", args.n, args.dtype)
    model, _model64, inputs = reference_models("rmsnorm", init, make_inputs, 0, args.dtype)
    ours = candidate_model(EXAMPLES / "rmsnorm" / "candidate" / "model_new.py", "model_new_rmsnorm", init, model,
                           args.dtype)
    impls = {"cuda-c++ (ours)": ours}
    for name in ("cute", "quack"):
        p = peer(name, "rmsnorm", model)
        if p.fn is None:
            print(f"{name}: {p.note}")
        else:
            impls[name] = p.fn
    x = inputs[0]
    with torch.no_grad():
        for name, fn in impls.items():
            for _ in range(3):
                fn(x)
            torch.cuda.synchronize()
            if args.time:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                times = []
                for _ in range(20):
                    start.record()
                    fn(x)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))
                print(f"{name:18s} {args.dtype} {shape}: median {sorted(times)[10]:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
