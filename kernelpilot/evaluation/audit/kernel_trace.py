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

A side stream of the candidate's that is joined to the caller's stream both ways is no side-stream finding
either (stream_joins.py): for that the call runs between two markers launched on the caller's stream
(annotated ``START_MARK`` and ``END_MARK``, so they are told from the candidate's own fills), each kernel keeps
its GPU span and launch correlation, and CUDA synchronization records are asked of the profiler.
"""

from __future__ import annotations

import heapq
import json
import os
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

from kernelpilot.evaluation.audit.stream_joins import SyncEvent

START_MARK, END_MARK = "kernelpilot::call_start", "kernelpilot::call_end"
SPIN_CYCLES = 200_000  # torch.cuda._sleep before the start marker: about 0.1 ms at 1.98 GHz


@dataclass
class KernelTrace:
    kernels: list[tuple[str, int]] = field(default_factory=list)  # (name, stream), time order
    home_stream: int | None = None
    launched_by: list[tuple[str, ...]] = field(default_factory=list)  # per kernel: enclosing aten ops, outer first
    off_stream_ops: list[str] = field(default_factory=list)  # aten ops dispatched off the caller's stream
    watched_dispatch: bool = False  # off_stream_ops was recorded (False: unknown)
    spans: list[tuple[float, float]] = field(default_factory=list)  # per kernel: GPU start and end (us)
    correlations: list[int] = field(default_factory=list)  # per kernel: its launch's correlation id
    start_mark: tuple[float, int] | None = None  # the marker before the call: GPU end, launch correlation
    end_mark: tuple[float, int] | None = None  # the marker after the call: GPU start, launch correlation
    syncs: list[SyncEvent] = field(default_factory=list)  # CUDA synchronizations, in the order recorded
    syncs_recorded: bool = False  # the profiler was asked for them (False: a side stream cannot be joined)
    start_spin: bool = False  # the caller's stream spun before the start marker (several kernels under its annotation)


def parse_trace(trace: dict[str, Any], syncs_recorded: bool = False) -> KernelTrace:
    """The kernels of a chrome trace from torch.profiler, without the caller's markers: those launched under
    the ``START_MARK`` / ``END_MARK`` annotations, else (an unannotated trace) the first kernel is the start."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                 key=lambda e: float(e.get("ts", 0)))
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and _int(e, "correlation") >= 0]
    launches = {_int(e, "correlation"): e for e in runtime}
    ops_by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("aten::"):
            ops_by_tid.setdefault(e.get("tid"), []).append(e)
    notes = [a for a in events
             if a.get("name") in (START_MARK, END_MARK) and a.get("cat") in ("user_annotation", "cpu_op")]
    marked: dict[str, set[int]] = {START_MARK: set(), END_MARK: set()}
    for a in notes:  # the launch inside the annotation (on its thread; any thread if the ids differ)
        inside = [r for r in runtime if _inside(r, a, same_thread=True)] or [r for r in runtime if _inside(r, a)]
        marked[str(a.get("name"))].update(_int(r, "correlation") for r in inside)
    # the start annotation holds a spin and the marker fill (the last to end is the marker); without annotations
    # (an older trace) the first kernel is the start marker
    starts = [i for i, e in enumerate(gpu) if _int(e, "correlation") in marked[START_MARK]] or ([0] if gpu else [])
    ends = [i for i, e in enumerate(gpu) if _int(e, "correlation") in marked[END_MARK]]
    start_i = max(starts, key=lambda i: float(gpu[i].get("ts", 0)) + float(gpu[i].get("dur", 0))) if starts else None
    end_i = min(ends, key=lambda i: float(gpu[i].get("ts", 0))) if ends else None
    dropped = set(starts) | set(ends)
    kept = (_int(e, "correlation") for i, e in enumerate(gpu) if i not in dropped)  # the markers need no ops
    enclosing = enclosing_ops([launches[c] for c in kept if c in launches], ops_by_tid)
    result = KernelTrace(syncs_recorded=syncs_recorded, start_spin=len(starts) > 1)  # a spin ran before the marker
    for i, e in enumerate(gpu):
        args = e.get("args") or {}
        try:
            stream = int(args.get("stream", e.get("tid", -1)))
        except (TypeError, ValueError):
            stream = -1
        begin, corr = float(e.get("ts", 0)), _int(e, "correlation")
        finish = begin + float(e.get("dur", 0))
        if i == start_i:
            result.home_stream, result.start_mark = stream, (finish, corr)
        elif i == end_i:
            result.end_mark = (begin, corr)
        elif i not in dropped:
            result.kernels.append((str(e.get("name", "")), stream))
            result.launched_by.append(enclosing.get(corr, ()))
            result.spans.append((begin, finish))
            result.correlations.append(corr)
    for e in events:
        if e.get("cat") == "cuda_sync":
            args = e.get("args") or {}
            result.syncs.append(SyncEvent(
                kind=str(args.get("cuda_sync_kind") or e.get("name", "")), correlation=_int(e, "correlation"),
                stream=_int(e, "stream"), wait_on_stream=_int(e, "wait_on_stream"),
                record_correlation=_int(e, "wait_on_cuda_event_record_corr_id")))
    result.syncs.sort(key=lambda y: y.correlation)
    return result


def _int(event: dict[str, Any], key: str) -> int:
    """An integer argument of a trace event, -1 where absent or not a number."""
    try:
        return int((event.get("args") or {}).get(key, -1))
    except (TypeError, ValueError):
        return -1


def _inside(inner: dict[str, Any], outer: dict[str, Any], same_thread: bool = False) -> bool:
    """``inner`` ran within ``outer``'s time range (and on its thread)."""
    t0, o0 = float(inner.get("ts", 0)), float(outer.get("ts", 0))
    return ((not same_thread or inner.get("tid") == outer.get("tid")) and o0 <= t0
            and t0 + float(inner.get("dur", 0)) <= o0 + float(outer.get("dur", 0)))


def enclosing_ops(launches: list[dict[str, Any]], ops_by_tid: dict[Any, list[dict[str, Any]]]
                  ) -> dict[int, tuple[str, ...]]:
    """For each launch (by correlation): the names of the aten ops on its thread whose CPU range encloses it,
    outermost first. One sweep per thread in start order, holding only the ops still open at the launch's
    start: a forward of many small ops is linear here (a scan of every op per launch took 95 s on the H100 for
    a call of 15k host syncs and 50k ops)."""
    found: dict[int, tuple[str, ...]] = {}
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for launch in launches:
        by_tid.setdefault(launch.get("tid"), []).append(launch)
    for tid, mine in by_tid.items():
        ops = sorted(ops_by_tid.get(tid, []), key=lambda op: float(op.get("ts", 0)))  # stable: trace order on ties
        ends = [float(op.get("ts", 0)) + float(op.get("dur", 0)) for op in ops]
        open_ops: list[tuple[float, int]] = []  # (end, index in ops): started at or before the current launch
        nxt = 0
        for launch in sorted(mine, key=lambda e: float(e.get("ts", 0))):
            t0 = float(launch.get("ts", 0))
            t1 = t0 + float(launch.get("dur", 0))
            while nxt < len(ops) and float(ops[nxt].get("ts", 0)) <= t0:
                heapq.heappush(open_ops, (ends[nxt], nxt))
                nxt += 1
            while open_ops and open_ops[0][0] < t0:  # ended before this launch, so before every later one
                heapq.heappop(open_ops)
            around = sorted(k for end, k in open_ops if t1 <= end)
            found[_int(launch, "correlation")] = tuple(str(ops[k].get("name", "")) for k in around)
    return found


class _SyncsFailed(Exception):
    """The profiler failed with CUDA synchronization records asked for (not the call itself)."""


def profile_call(fn: Callable[..., Any], inputs: list[Any], device: str,
                 watch: Callable[[], ContextManager[Any]] = nullcontext) -> KernelTrace:
    """Profile one call between two one-element fills on the caller's stream (the first marks the home stream;
    both bound the call on the GPU clock for stream_joins). The call runs as it is timed, under no dispatch mode
    (the audit's operator recorder notes the streams ops ran on). CUDA synchronization records are asked for; a
    profiler that fails with them (refuses the option, or fails to stop or export) profiles the call again
    without, so the kernel checks never lose their trace to them (no side stream can then count as joined).

    ``watch()`` wraps the call alone (the watchdog's call allowance): starting the profiler, stopping it and
    reading its trace are the harness's work, which for a call of many events takes far longer than the call
    (a fallback whose error message formatted a 5-D tensor on each call, about 15k ``item()`` syncs: H100,
    torch 2.11)."""
    try:
        return _profile(fn, inputs, device, syncs=True, watch=watch)
    except _SyncsFailed:
        return _profile(fn, inputs, device, syncs=False, watch=watch)


def _profile(fn: Callable[..., Any], inputs: list[Any], device: str, syncs: bool,
             watch: Callable[[], ContextManager[Any]]) -> KernelTrace:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    marker = torch.empty(1, device=device)
    torch.cuda.synchronize()
    try:
        options: dict[str, Any] = {}
        if syncs:
            from torch._C._profiler import _ExperimentalConfig

            options["experimental_config"] = _ExperimentalConfig(enable_cuda_sync_events=True)
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **options)
        prof.start()
    except Exception as exc:
        if syncs:
            raise _SyncsFailed(str(exc)) from exc
        raise
    try:
        with record_function(START_MARK):
            # the caller's stream kept busy (about 0.1 ms) before its marker: a side stream that does not wait for
            # it starts before the marker ends, which the GPU clock shows (stream_joins' entry check)
            torch.cuda._sleep(SPIN_CYCLES)
            marker.fill_(1.0)
        with watch(), torch.no_grad():
            fn(*inputs)
        with record_function(END_MARK):
            marker.fill_(2.0)
        torch.cuda.synchronize()
    except BaseException:  # the call's own failure (a CUDA error included) is the caller's to judge
        try:
            prof.stop()
        except Exception:  # noqa: BLE001 - the call's exception is the one to report
            pass
        raise
    fd, path = tempfile.mkstemp(suffix=".json", prefix="kp-trace-")
    os.close(fd)
    try:
        prof.stop()
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as fh:
            trace = json.load(fh)
    except Exception as exc:
        if syncs:
            raise _SyncsFailed(str(exc)) from exc
        raise
    finally:
        os.unlink(path)
    return parse_trace(trace, syncs_recorded=syncs)
