"""GPU time of each recorded ATen call from the profiler's device records (CUPTI, through torch.profiler).

Each call the trace records runs inside a profiler range named after its index; the kernels launched
inside that range are summed. CUDA events recorded from the host around a call count the GPU's wait for
the host as well, whenever the GPU is ahead: the instrumented step is host-bound, and on the H200 that
inflated a module's time up to fourteenfold (benchmarks/apply-2026-12-03). ``KERNELPILOT_OP_TIMER``:
``profiler`` (the default on a GPU; on the CPU it times host ranges, for the tests), ``events`` (CUDA
events, the earlier way), or ``host`` (the host clock, the default on the CPU).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from kernelpilot.errors import KernelpilotError

PREFIX = "kp_op#"


def choice(cuda: bool) -> str:
    wanted = os.environ.get("KERNELPILOT_OP_TIMER", "").strip().lower()
    if wanted in ("profiler", "events", "host"):
        return wanted
    return "profiler" if cuda else "host"


class ProfilerTimer:
    """The profiler running over the traced steps; ``range(i)`` around call ``i``; ``times_ms()`` after."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self._profile: Any = None
        self._fast = None

    def __enter__(self) -> "ProfilerTimer":
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)  # no dispatcher op: not traced
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._profile = profile(activities=activities)
        self._profile.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self._profile.__exit__(*exc)

    @contextlib.contextmanager
    def range(self, index: int) -> Iterator[None]:
        if self._fast is not None:
            with self._fast(f"{PREFIX}{index}"):
                yield
        else:
            import torch

            with torch.profiler.record_function(f"{PREFIX}{index}"):
                yield

    def times_ms(self) -> dict[int, float]:
        """Call index -> milliseconds: the device time of the kernels it launched (the host time of its
        range on the CPU)."""
        out: dict[int, float] = {}
        for event in self._profile.events():
            if not event.name.startswith(PREFIX):
                continue
            index = int(event.name[len(PREFIX):])
            us = event.device_time_total if self.cuda else event.cpu_time_total
            out[index] = out.get(index, 0.0) + us / 1e3
        if not out:
            raise KernelpilotError("the profiler recorded none of the traced calls; run again with "
                                   "KERNELPILOT_OP_TIMER=events (CUDA events, which count host waits as GPU time).")
        return out
