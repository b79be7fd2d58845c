"""One output comparison (compare.compare) fused (compare_kernel.py) and in torch chunks, on the GPU.

    python benchmarks/compare_speed.py [--out DIR] [--repeat 3]

Sizes are those of the verdicts that were slow on the H200: the softmax example's output (32768 x 16384
bf16) and KernelBench level 1's large elementwise outputs (4096 x 393216 fp32, 1.6e9 elements). Each
comparison is timed after one warm-up (the fused kernels compile on first use in a process); the
verdict fields of both paths are checked equal. Writes DIR/compare_speed.json; prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = {"softmax example 32768x16384 bf16": ((32768, 16384), "bfloat16"),
         "KernelBench L1 4096x393216 fp32": ((4096, 393216), "float32"),
         "small 4096x4096 fp32": ((4096, 4096), "float32")}


def _time(fn, repeat: int) -> tuple[float, dict]:  # noqa: ANN001
    import torch

    result = fn()  # warm-up (and the fused kernels' compile)
    best = float("inf")
    for _ in range(repeat):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import torch

    from kernelpilot.evaluation.correctness import compare as cmp
    from kernelpilot.evaluation.correctness.verify import Tolerance

    rows = []
    for name, (shape, dtype) in SIZES.items():
        dt = getattr(torch, dtype)
        truth = torch.randn(shape, device="cuda", dtype=torch.float64)
        ref = truth.to(dt)
        out = (truth * (1 + 1e-3 * torch.rand_like(truth))).to(dt)
        tol = Tolerance(1e-2, 1e-2, 1e-2)
        os.environ.pop("KERNELPILOT_FUSED_COMPARE", None)
        fused_s, fused = _time(lambda: cmp.compare(out, ref, truth, tol), args.repeat)
        os.environ["KERNELPILOT_FUSED_COMPARE"] = "0"
        torch_s, slow = _time(lambda: cmp.compare(out, ref, truth, tol), args.repeat)
        os.environ.pop("KERNELPILOT_FUSED_COMPARE", None)
        same = all(fused[k] == slow[k] for k in ("passed", "mismatched", "unwritten", "message"))
        rows.append({"size": name, "elements": truth.numel(), "fused_s": round(fused_s, 4),
                     "torch_s": round(torch_s, 4), "speedup": round(torch_s / fused_s, 1), "same_verdict": same,
                     "normalized_error": [fused["normalized_error"], slow["normalized_error"]]})
        del truth, ref, out
        torch.cuda.empty_cache()
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d"), "rows": rows}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compare_speed.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'size':36} {'elements':>13} {'fused s':>8} {'torch s':>8} {'x':>6} same")
    for r in rows:
        print(f"{r['size']:36} {r['elements']:>13} {r['fused_s']:>8.4f} {r['torch_s']:>8.4f} {r['speedup']:>6.1f} "
              f"{r['same_verdict']}")
    return 0 if all(r["same_verdict"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
