"""Where a training step's GPU time goes, as `kernelpilot apply` runs it: the script as it is and with the approved
drop-ins swapped in, each under torch.compile (``--mode``) or eager, profiled over a few steps after warm-up.

    cd REPO && python benchmarks/step_profile.py --kernels problems --mode default --out prof.json train.py

Per run: the GPU time of a step (kernels summed, ms per step) by kind (GEMM, attention, Inductor's Triton kernels,
other Triton kernels (the drop-ins'), the optimizer's, memory copies and fills, everything else) and the kernels
that take most of it. ``--fused-adamw``: both runs with torch's own fused AdamW (``fused=True`` made the default of
``torch.optim.AdamW`` for the run), to see what of the optimizer's share torch itself already closes. Issue 52
asks for this where `apply --compile` misses its goals: it says which share of the compiled step a head+loss or
norm kernel can still move. Runs in the repository of the script (its
``problems/*/candidate/dropin.py``, as `apply --kernels` finds them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

KINDS = (  # first match wins: (kind, pattern over the kernel's name)
    ("attention", r"flash|fmha|attention|sdpa|cudnn"),
    ("gemm", r"gemm|nvjet|cutlass|xmma|cublas|matmul|Kernel2|splitK"),
    ("optimizer", r"multi_tensor|foreach|adam"),
    ("inductor", r"^triton_"),
    ("copy/fill", r"copy|fill|memset|Memcpy|Memset|cat_|elementwise_kernel.*direct_copy"),
    ("elementwise/reduce", r"elementwise|vectorized|reduce|softmax|index|scatter|gather|embedding|nll|log_softmax"),
)


def kind_of(name: str, triton_names: set[str]) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.I):
            return kind
    return "triton (drop-in)" if name in triton_names else "other"


def fused_adamw_default() -> None:
    """``torch.optim.AdamW(...)`` as ``AdamW(..., fused=True)`` unless the script says otherwise."""
    import torch

    init = torch.optim.AdamW.__init__

    def fused_init(self: object, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("fused", True)
        init(self, *args, **kwargs)

    torch.optim.AdamW.__init__ = fused_init  # type: ignore[method-assign]


def profile_run(script: Path, argv: list[str], dropins: list[Path], *, swap: bool, compiled: bool, mode: str,
                warmup: int, steps: int) -> dict[str, object]:
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.profiler import ProfilerActivity, profile, schedule

    from kernelpilot.dropin.apply_run import measure

    cuda = torch.cuda.is_available()  # on a CPU machine (a smoke run of this script) the CPU's operators instead
    prof = profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU],
                   schedule=schedule(wait=warmup, warmup=1, active=steps, repeat=1))

    def step(*_: object) -> None:  # the step's kernels finish inside its window (the GPU runs behind the host):
        if cuda:                      # on 2026-12-07 the kernels' sum was 12% over the unprofiled step without it
            torch.cuda.synchronize()
        prof.step()

    handle = register_optimizer_step_post_hook(step)
    prof.start()
    try:
        result = measure(script, argv, steps=steps + 2, warmup=warmup, dropins=dropins, compile_root=compiled,
                         swap=swap, compile_mode=mode)
    finally:
        handle.remove()
        prof.stop()
    per: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if not cuda:
            per[event.name] += event.self_cpu_time_total / 1000 / steps
        elif event.device_type == torch.autograd.DeviceType.CUDA:
            per[event.name] += event.device_time_total / 1000 / steps  # ms per step
    triton_names = {name for name in per if not re.search(r"[<(:]", name)}  # plain names: jit-compiled kernels
    kind = {name: kind_of(name, triton_names) for name in per}
    kinds: dict[str, float] = defaultdict(float)
    for name, ms in per.items():
        kinds[kind[name]] += ms
    step = sorted(result.step_ms[warmup:])
    return {"swap": swap, "compiled": compiled, "mode": mode if compiled else "eager", "error": result.error,
            "step_ms_median": step[len(step) // 2] if step else None, "gpu_ms": sum(per.values()),
            "kinds_ms": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "top": sorted(([n[:110], round(ms, 3), kind[n]] for n, ms in per.items()),
                          key=lambda r: -r[1])[:25],
            "peak_mem_bytes": result.memory.peak_mem_bytes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default="problems")
    parser.add_argument("--mode", default="default", help="torch.compile's mode; 'eager' compiles nothing")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default="step_profile.json")
    parser.add_argument("--fused-adamw", action="store_true", help="both runs with AdamW(fused=True) as its default")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    from kernelpilot.dropin.apply_command import find_dropins

    script = Path(args.script).resolve()
    dropins = find_dropins(Path(args.kernels), script)
    compiled = args.mode != "eager"
    if args.fused_adamw:
        fused_adamw_default()
    runs = [profile_run(script, args.args, dropins, swap=swap, compiled=compiled, mode=args.mode, warmup=args.warmup,
                        steps=args.steps) for swap in (False, True)]
    Path(args.out).write_text(json.dumps({"dropins": [str(d) for d in dropins], "fused_adamw": args.fused_adamw,
                                          "runs": runs}, indent=1) + "\n")
    kinds = sorted({k for run in runs for k in run["kinds_ms"]}, key=lambda k: -runs[0]["kinds_ms"].get(k, 0.0))
    fused = ", AdamW fused" if args.fused_adamw else ""
    print(f"GPU ms per step, {args.mode}{fused}; swapped: {', '.join(d.parent.parent.name for d in dropins)}")
    print(f"{'kind':<22}{'as it is':>10}{'swapped':>10}")
    for kind in kinds:
        print(f"{kind:<22}" + "".join(f"{run['kinds_ms'].get(kind, 0.0):>10.2f}" for run in runs))
    print(f"{'all kernels':<22}" + "".join(f"{run['gpu_ms']:>10.2f}" for run in runs))
    print(f"{'step (host clock)':<22}" + "".join(f"{run['step_ms_median'] or 0:>10.2f}" for run in runs))
    for run in runs:
        failed = f": {run['error']}" if run["error"] else ""
        print(f"-- top kernels, {'swapped' if run['swap'] else 'as it is'}{failed}")
        for name, ms, kind in run["top"][:12]:
            print(f"  {ms:8.3f}  {kind:<18} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
