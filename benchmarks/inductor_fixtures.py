"""Record torch.compile's generated code (Inductor output) for the problems Triton candidates start from.

Run on a GPU machine:  python3 benchmarks/inductor_fixtures.py OUTDIR
Writes OUTDIR/<name>.py (the output code Inductor ran, unchanged) and OUTDIR/<name>.json (problem, torch,
triton, GPU, date, compile mode). tests/data/inductor/ holds a committed copy: the converter's CPU tests
read those, so they test real Inductor output, not hand-written imitations.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBLEMS = {
    "softmax": ROOT / "examples" / "softmax" / "problem.py",
    "rmsnorm": ROOT / "examples" / "rmsnorm" / "problem.py",
    "layernorm": ROOT / "examples" / "layernorm" / "problem.py",
    "cross_entropy": ROOT / "examples" / "cross_entropy" / "problem.py",
    "fused_chain": ROOT / "benchmarks" / "problems" / "fused_chain.py",
    "row_sum": ROOT / "benchmarks" / "problems" / "row_sum.py",
    "gemm_bias_gelu": ROOT / "examples" / "gemm_bias_gelu" / "problem.py",
    "conv_relu": ROOT / "benchmarks" / "problems" / "conv_relu.py",
}


def record(name: str, path: Path, out: Path) -> str:
    import torch
    import triton
    from torch._inductor.utils import run_and_get_code

    from kernelpilot.problem import load_problem

    module = load_problem(path).load_module()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    torch._dynamo.reset()
    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(model, mode="default"), *inputs)
    (out / f"{name}.py").write_text(codes[0])
    meta = {"problem": str(path.relative_to(ROOT)), "torch": torch.__version__, "triton": triton.__version__,
            "gpu": torch.cuda.get_device_name(), "date": dt.date.today().isoformat(), "compile_mode": "default",
            "outputs": len(codes)}
    (out / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return f"{name}: {len(codes[0].splitlines())} lines, {codes[0].count('@triton.jit')} triton kernels"


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, path in PROBLEMS.items():
        try:
            print(record(name, path, out), flush=True)
        except Exception as exc:  # noqa: BLE001 - record what failed, go on
            print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
