"""Where an approved drop-in's time goes in a model's step, per call, on the GPU (issue 28).

    python benchmarks/dropin_overhead.py REPO        # REPO: apply_gpu.py's repository (problems/*/candidate/dropin.py)

For every approved drop-in under REPO/problems, at the problem's recorded shapes: the host time per call (no
synchronisation, the launch queue kept short) and the GPU time per call (CUDA events around 50 calls) of
the problem's eager Model, the drop-in operator, and the candidate's own forward called directly, each
forward alone and forward plus backward; then the pieces of the drop-in's host path alone (the
operator's dispatch, the parameter rebinding). Prints one table; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable


def _host_us(fn: Callable[[], Any], n: int = 200) -> float:
    import torch

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    total = 0.0
    for _ in range(n // 10):  # ten calls, then drain the queue: the host never waits on a full queue
        t = time.perf_counter()
        for _ in range(10):
            fn()
        total += time.perf_counter() - t
        torch.cuda.synchronize()
    return total / (n // 10 * 10) * 1e6


def _gpu_us(fn: Callable[[], Any], n: int = 50) -> float:
    import torch

    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n * 1e3


PROFILE = False


def measure(dropin_file: Path) -> dict[str, float]:
    import torch

    from kernelpilot.dropin.apply_run import load_dropin

    d = load_dropin(dropin_file)
    d.GRADIENT_CHECK = d.GRADIENT_CHECK or "measuring"
    problem = d._problem
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda()
    xs = [x.cuda().requires_grad_(x.is_floating_point()) for x in problem.get_inputs()]
    ps = [getattr(model, n) for n in d.PARAMS]

    def first(out: Any) -> Any:
        return out[0] if isinstance(out, (tuple, list)) else out

    grad = torch.randn_like(first(model(*xs)))
    kernel_model = d._model("kernel", xs[0].device)
    fns = {
        "eager fwd": lambda: model(*xs),
        "drop-in fwd": lambda: d.op(*xs, *ps),
        "ModelNew fwd (direct)": lambda: kernel_model(*[x.detach() for x in xs]),
        "eager fwd+bwd": lambda: first(model(*xs)).backward(grad),
        "drop-in fwd+bwd": lambda: first(d.op(*xs, *ps)).backward(grad),
    }
    if hasattr(d, "call"):  # the direct eager path install() swaps in
        fns["eager path fwd"] = lambda: d.call(*xs, *ps)
        fns["eager path fwd+bwd"] = lambda: first(d.call(*xs, *ps)).backward(grad)
    out: dict[str, float] = {}
    for name, fn in fns.items():
        out[f"{name} host us"] = round(_host_us(fn), 1)
        out[f"{name} gpu us"] = round(_gpu_us(fn), 1)
    if PROFILE:
        import cProfile
        import pstats

        fn = fns.get("eager path fwd+bwd", fns["drop-in fwd+bwd"])
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(100):
            fn()
        profiler.disable()
        torch.cuda.synchronize()
        print(f"== {dropin_file.parent.parent.name}: host profile of 100 calls (fwd+bwd), by own time")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(14)
    params = dict(zip(d.PARAMS, ps))
    with torch.no_grad():
        def rebind() -> None:
            with torch.nn.utils.stateless._reparametrize_module(kernel_model, params, strict=False):
                pass
        out["_reparametrize_module host us"] = round(_host_us(rebind), 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", action="store_true", help="also cProfile 100 forward+backward calls of each")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    results = {}
    for dropin in sorted(args.repo.glob("problems/*/candidate/dropin.py")):
        try:
            results[dropin.parent.parent.name] = measure(dropin)
        except Exception as exc:  # noqa: BLE001 - one drop-in's failure is reported, the others measured
            results[dropin.parent.parent.name] = {"error": f"{type(exc).__name__}: {exc}"}
    for name, row in results.items():
        print(f"== {name}")
        for key, value in row.items():
            print(f"  {key:<40} {value}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
