"""The program Nsight Compute and compute-sanitizer run: one problem, one candidate, NVTX ranges.

    python -m kernelpilot.profiling.target --problem P --candidate C [--iters 3] [--baseline compiled]
        [--small]

Candidate calls run inside the ``kp_candidate`` NVTX range; the baseline (torch.compile by default,
or eager) inside ``kp_baseline``; a warm-up call of each runs outside any range, so ncu sees steady
state launches only. ``--small`` shrinks the problem's module-level size constants (for the
sanitizer, which slows kernels by 10-100x). Exit status 0 means every call completed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.evaluation.correctness.verify import draw_inputs
from kernelpilot.profiling.ncu import BASELINE_RANGE, CANDIDATE_RANGE


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def shrink_sizes(module: ModuleType, limit: int = 256) -> dict[str, tuple[int, int]]:
    """Scale module-level int size constants above ``limit`` down to ``limit`` (keeping divisibility
    by 16 where the original had it). Returns {name: (old, new)}."""
    changed: dict[str, tuple[int, int]] = {}
    for name, value in list(vars(module).items()):
        if name.startswith("_") or type(value) is not int or value <= limit:
            continue
        new = limit
        if value % 16 == 0:
            new -= new % 16
        setattr(module, name, new)
        changed[name] = (value, new)
    return changed


def load_pair(problem_path: Path, candidate_path: Path, small: bool = False) -> tuple[Any, Any, list[Any]]:
    """(reference Model, ModelNew with the same weights, inputs), all on the GPU."""
    import torch

    problem = _import(problem_path, "kp_problem")
    if small:
        shrink_sizes(problem)
    model_file = candidate_path / "model_new.py" if candidate_path.is_dir() else candidate_path
    candidate = _import(model_file, "kp_candidate_module")
    torch.manual_seed(0)
    init = problem.get_init_inputs()
    reference = problem.Model(*init).cuda().eval()
    new = candidate.ModelNew(*init).cuda().eval()
    new.load_state_dict(reference.state_dict())
    inputs = draw_inputs(problem, 0, "normal", "cuda")  # the engine's own inputs, drawn on the GPU
    return reference, new, inputs


def kernel_table(fn: Any, inputs: list[Any], iters: int) -> list[dict[str, Any]]:
    """GPU kernels launched by ``iters`` calls of ``fn``: name, launches per call, µs per call."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(*inputs)
        torch.cuda.synchronize()
    rows = []
    for evt in prof.key_averages():
        if evt.device_type != DeviceType.CUDA:
            continue
        total = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0.0)
        rows.append({"name": evt.key, "launches": evt.count / iters, "us_per_call": total / iters})
    return sorted(rows, key=lambda r: r["us_per_call"], reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelpilot.profiling.target")
    parser.add_argument("--problem", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--baseline", choices=["compiled", "eager", "none"], default="compiled")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--torch-profiler", type=Path, default=None,
                        help="write a kernel table per range (JSON) from torch.profiler instead of NVTX ranges")
    args = parser.parse_args(argv)

    import torch

    reference, new, inputs = load_pair(args.problem, args.candidate, small=args.small)
    baseline = None
    if args.baseline == "compiled":
        baseline = torch.compile(reference)
    elif args.baseline == "eager":
        baseline = reference
    with torch.no_grad():
        new(*inputs)
        if baseline is not None:
            baseline(*inputs)
        torch.cuda.synchronize()
        if args.torch_profiler is not None:
            tables = {CANDIDATE_RANGE: kernel_table(new, inputs, args.iters)}
            if baseline is not None:
                tables[BASELINE_RANGE] = kernel_table(baseline, inputs, args.iters)
            args.torch_profiler.write_text(json.dumps(tables))
        else:
            for _ in range(args.iters):
                with torch.cuda.nvtx.range(CANDIDATE_RANGE):
                    new(*inputs)
                torch.cuda.synchronize()
                if baseline is not None:
                    with torch.cuda.nvtx.range(BASELINE_RANGE):
                        baseline(*inputs)
                    torch.cuda.synchronize()
    print("kernelpilot-target: done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
