"""One profiled call of a candidate: the GPU work it ran, on which stream, launched from which aten op
(worker side; torch imported lazily, the trace parsing is pure Python).

The stream rule (``side-stream`` in runtime_audit) needs to tell two things apart that look the same in
a kernel list:

- a candidate that moves work off the caller's stream (``with torch.cuda.stream(s)``, a stream of its own
  in C++ or Triton), which the caller's CUDA events do not time;
- a library that fans its own work out over internal streams and joins them before it returns: cuDNN ran
  ``dgrad_engine`` kernels of ``conv_transpose2d/3d`` on a stream of its own (H200, cuDNN 9, torch 2.11;
  KernelBench level1/72 and /75, whose c0 is torch's own call), and the caller's events cover them.

So each kernel also records the aten ops whose CPU range encloses its launch (joined through the
profiler's correlation id), and the audit's operator recorder (runtime_audit.record_ops) notes every
aten op that was called while the current stream was not the caller's (``off_stream_ops``).
runtime_audit.kernel_findings judges a side-stream kernel the library's own when a library op
(convolution, matmul, attention: runtime_audit.LIBRARY_OPS) launched it and no op was dispatched off the
caller's stream.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class KernelTrace:
    kernels: list[tuple[str, int]] = field(default_factory=list)  # (name, stream), time order
    home_stream: int | None = None
    launched_by: list[tuple[str, ...]] = field(default_factory=list)  # per kernel: enclosing aten ops, outer first
    off_stream_ops: list[str] = field(default_factory=list)  # aten ops dispatched off the caller's stream
    watched_dispatch: bool = False  # off_stream_ops was recorded (False: unknown)


def parse_trace(trace: dict[str, Any]) -> KernelTrace:
    """The kernels of a chrome trace from torch.profiler, the first one (the caller's marker) dropped."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                 key=lambda e: float(e.get("ts", 0)))
    launches = {(e.get("args") or {}).get("correlation"): e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and (e.get("args") or {}).get("correlation")}
    ops_by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("aten::"):
            ops_by_tid.setdefault(e.get("tid"), []).append(e)
    result = KernelTrace()
    for e in gpu:
        args = e.get("args") or {}
        try:
            stream = int(args.get("stream", e.get("tid", -1)))
        except (TypeError, ValueError):
            stream = -1
        result.kernels.append((str(e.get("name", "")), stream))
        result.launched_by.append(_enclosing_ops(launches.get(args.get("correlation")), ops_by_tid))
    if result.kernels:
        result.home_stream = result.kernels[0][1]
        result.kernels, result.launched_by = result.kernels[1:], result.launched_by[1:]  # drop the marker
    return result


def _enclosing_ops(launch: dict[str, Any] | None, ops_by_tid: dict[Any, list[dict[str, Any]]]) -> tuple[str, ...]:
    if launch is None:
        return ()
    t0 = float(launch.get("ts", 0))
    t1 = t0 + float(launch.get("dur", 0))
    around = [op for op in ops_by_tid.get(launch.get("tid"), [])
              if float(op.get("ts", 0)) <= t0 and t1 <= float(op.get("ts", 0)) + float(op.get("dur", 0))]
    around.sort(key=lambda op: float(op.get("ts", 0)))
    return tuple(str(op.get("name", "")) for op in around)


def profile_call(fn: Callable[..., Any], inputs: list[Any], device: str) -> KernelTrace:
    """Profile one call; a one-element fill on the caller's stream marks the home stream. The call runs
    as it is timed, under no dispatch mode (the audit's operator recorder notes the streams ops ran on)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    marker = torch.empty(1, device=device)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        marker.fill_(1.0)
        with torch.no_grad():
            fn(*inputs)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="kp-trace-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as fh:
            trace = json.load(fh)
    finally:
        os.unlink(path)
    return parse_trace(trace)
