"""Where the guard bands' time goes (kernelpilot/evaluation/correctness/bounds.py), on a GPU, in one process.

At 51d5624 the guard added about 2.9 s to a verdict after a kernel edit and 0.35 s after a model_new.py edit
(benchmarks/edit-loop-2026-12-06/README.md). This script sets up an allocator like a warm worker's (inputs, the
kept reference outputs of 30 trials, a model), poisons it as verify does, then times each step of one guarded
call: the snapshot before, the runs and bands, the fills, the history switched on, the call, the snapshot after,
the windows and their reads. It does that cold (the first guard in the process) and warm, and again with every
core busy (``--busy``, as while a kernel edit's SASS check compiles beside the worker).

    python benchmarks/bounds_cost.py [--elements 268435456] [--kept 30] [--busy]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _burn(stop: float) -> None:
    while time.time() < stop:
        pass


def one_guard(call, device: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The steps of bounds.guarded, each timed (host clock, device synced where the guard syncs)."""
    import torch

    from kernelpilot.evaluation.correctness import bounds

    t: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        t[name] = round(now - mark, 4)
        mark = now

    torch.cuda.synchronize()
    segments = torch.cuda.memory_snapshot()
    lap("snapshot_before")
    runs = bounds.spare_runs(segments)
    bands = bounds.guard_bands(runs)
    lap("runs_and_bands")
    for band in bands:
        bounds._alias(band.start, band.end - band.start, device).fill_(band.canary)
    torch.cuda.synchronize()
    lap("fills")
    history = torch.cuda.memory._record_memory_history
    history(enabled="all", context=None, stacks="python", max_entries=1 << 20, clear_history=True)
    lap("history_on")
    call()
    torch.cuda.synchronize()
    lap("call")
    snap = torch.cuda.memory._snapshot()
    lap("snapshot_after")
    history(enabled=None)
    lap("history_off")
    index = torch.device(device).index or 0
    trace = snap.get("device_traces", [[]])[index]
    made = bounds.allocations(trace)
    windows = bounds.to_read(bands, bounds._merge(made + bounds.new_segments(trace)), snap.get("segments", []))
    lap("windows")
    for lo, hi, expected in windows:
        (bounds._alias(lo, hi - lo, device).cpu() != expected).nonzero()
    lap("reads")
    t.update(blocks=sum(len(s.get("blocks", [])) for s in segments), runs=len(runs), bands=len(bands),
             windows=len(windows), trace=len(trace), total=round(sum(v for k, v in t.items()), 4))
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=1 << 28, help="elements of the bf16 input (default 512 MiB)")
    ap.add_argument("--kept", type=int, default=30, help="reference outputs kept, as the warm worker keeps them")
    ap.add_argument("--busy", action="store_true", help="also time it with every core busy")
    args = ap.parse_args()
    import torch

    from kernelpilot.evaluation.correctness.inputs import poison_allocator

    device = "cuda"
    x = torch.randn(args.elements // 4096, 4096, device=device, dtype=torch.bfloat16)
    kept = [torch.randn(4096 + i, device=device) for i in range(args.kept * 8)]  # small tensors, many blocks
    kept += [torch.empty_like(x) for _ in range(2)]
    weight = torch.randn(4096, device=device, dtype=torch.bfloat16)

    def call() -> torch.Tensor:
        tmp = torch.empty_like(x)
        torch.mul(x, weight, out=tmp)
        return torch.softmax(tmp, dim=-1)

    rows = []
    for label in ("cold", "warm", "warm"):
        poison_allocator(4 * x.numel() * x.element_size(), device)
        rows.append((label, one_guard(call, device)))
    if args.busy:
        stop = time.time() + 20
        procs = [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(os.cpu_count() or 2)]
        for p in procs:
            p.start()
        poison_allocator(4 * x.numel() * x.element_size(), device)
        rows.append(("busy cores", one_guard(call, device)))
        for p in procs:
            p.terminate()
    keys = list(rows[0][1])
    print("step".ljust(16) + "".join(label.rjust(12) for label, _ in rows))
    for k in keys:
        print(k.ljust(16) + "".join(str(r[k]).rjust(12) for _, r in rows))
    del kept
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
