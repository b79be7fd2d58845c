"""Timing: eager, torch.compile and the candidate measured interleaved in one run (worker side).

Method, per sample (round-robin over the implementations, the order rotating each sample):

1. pick the next input set from a pool of several sets with distinct storage (kept alive for the whole
   run so addresses are not recycled) and re-draw its float values in place (outside the timed region),
   so a cache keyed on pointers returns stale results and a cache keyed on content never hits;
2. for each implementation: write an L2-flush buffer (>= 2x L2, at least 256 MiB), full device sync,
   host clock, start event, call, end event, full device sync, host clock;
3. for a sample of calls, keep the candidate's and eager's outputs on the same inputs and compare them
   after the timed region (result replay shows up as a mismatch).

Per implementation: median, IQR, min of the event times; host median (call + full device sync); round
medians for a noise estimate (half the range of round medians, percent of the median). Timers are the
objects captured when the worker started (``Pristine``), so a candidate that patches ``time`` or
``torch.cuda.Event`` does not change what the harness reads.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from kernelpilot.verdict import Timing

MIN_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass
class Pristine:
    """Timer and sync functions captured before any candidate code ran."""

    perf_counter: Callable[[], float]
    event_cls: Any
    record: Callable[..., Any]
    elapsed: Callable[..., float]
    synchronize: Callable[[], None]

    @classmethod
    def capture(cls) -> "Pristine":
        import time

        import torch

        return cls(time.perf_counter, torch.cuda.Event, torch.cuda.Event.record,
                   torch.cuda.Event.elapsed_time, torch.cuda.synchronize)


@dataclass
class TimingSettings:
    warmup: int = 5
    rounds: int = 5
    samples_per_round: int = 20
    replay_checks: int = 8
    cuda_graphs: bool = False
    flush_bytes: int | None = None


@dataclass
class TimingRun:
    timings: dict[str, Timing] = field(default_factory=dict)
    replay_failures: list[str] = field(default_factory=list)
    replay_checked: int = 0
    notes: list[str] = field(default_factory=list)


def flush_buffer_bytes(device: str, requested: int | None) -> int:
    import torch

    if requested:
        return int(requested)
    props = torch.cuda.get_device_properties(torch.device(device))
    l2 = int(getattr(props, "L2_cache_size", 0) or getattr(props, "l2_cache_size", 0) or 0)
    return max(2 * l2, MIN_FLUSH_BYTES)


def summarise(event_ms: list[float], host_ms: list[float], rounds: list[list[float]]) -> Timing:
    ordered = sorted(event_ms)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return Timing(median_ms=statistics.median(ordered), q1_ms=q[0], q3_ms=q[2], min_ms=ordered[0],
                  samples=len(ordered), host_median_ms=statistics.median(host_ms) if host_ms else None,
                  round_medians_ms=[statistics.median(r) for r in rounds if r])


def noise_pct(timing: Timing) -> float | None:
    r = timing.round_medians_ms
    if len(r) < 2 or timing.median_ms <= 0:
        return None
    return 100.0 * (max(r) - min(r)) / (2.0 * timing.median_ms)


def _graphed(fn: Callable[..., Any], static: list[Any]) -> Callable[..., Any]:
    """Capture ``fn(*static)`` in a CUDA graph; the returned callable replays it (inputs ignored)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            fn(*static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out = fn(*static)

    def replay(*_args: Any) -> Any:
        graph.replay()
        return out

    return replay


def measure(impls: dict[str, Callable[..., Any]], pool: list[list[Any]], refill: Callable[[list[Any]], None],
            settings: TimingSettings, pristine: Pristine, device: str,
            check: Callable[[Any, Any], str] | None = None, checked: tuple[str, str] = ("candidate", "eager")) -> TimingRun:
    """Time every implementation interleaved. ``check(candidate_out, eager_out)`` returns "" when they agree."""
    import torch

    run = TimingRun()
    names = list(impls)
    calls = dict(impls)
    if settings.cuda_graphs:
        static = pool[0]
        for name in names:
            try:
                calls[name] = _graphed(impls[name], static)
            except Exception as exc:  # capture refused (host sync, allocation): time it eagerly
                run.notes.append(f"CUDA graph capture failed for {name} ({type(exc).__name__}); timed without graphs")
        pool = [static]
    flush = torch.empty(flush_buffer_bytes(device, settings.flush_bytes) // 4, dtype=torch.int32, device=device)
    with torch.no_grad():
        for i in range(max(settings.warmup, 1)):
            for name in names:
                calls[name](*pool[i % len(pool)])
    pristine.synchronize()
    total = settings.rounds * settings.samples_per_round
    check_every = max(total // max(settings.replay_checks, 1), 1) if check else 0
    event_ms: dict[str, list[float]] = {n: [] for n in names}
    host_ms: dict[str, list[float]] = {n: [] for n in names}
    rounds: dict[str, list[list[float]]] = {n: [] for n in names}
    sample = 0
    for _r in range(settings.rounds):
        for n in names:
            rounds[n].append([])
        for _s in range(settings.samples_per_round):
            inputs = pool[sample % len(pool)]
            refill(inputs)
            order = names[sample % len(names):] + names[: sample % len(names)]
            keep = check is not None and sample % check_every == 0
            outs: dict[str, Any] = {}
            for name in order:
                flush.zero_()
                start, end = pristine.event_cls(enable_timing=True), pristine.event_cls(enable_timing=True)
                pristine.synchronize()
                h0 = pristine.perf_counter()
                pristine.record(start)
                with torch.no_grad():
                    out = calls[name](*inputs)
                pristine.record(end)
                pristine.synchronize()
                h1 = pristine.perf_counter()
                ms = float(pristine.elapsed(start, end))
                event_ms[name].append(ms)
                host_ms[name].append((h1 - h0) * 1000.0)
                rounds[name][-1].append(ms)
                if keep and name in checked:
                    outs[name] = _snapshot(out)
                del out
            if keep and all(k in outs for k in checked) and check is not None:
                run.replay_checked += 1
                problem = check(outs[checked[0]], outs[checked[1]])
                if problem:
                    run.replay_failures.append(f"timed call {sample}: {problem}")
            sample += 1
    del flush
    for name in names:
        run.timings[name] = summarise(event_ms[name], host_ms[name], rounds[name])
    return run


def _snapshot(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().clone() if type(out) is torch.Tensor else out
    if isinstance(out, (tuple, list)):
        return type(out)(_snapshot(o) for o in out)
    return out


def host_gap_flag(timings: dict[str, Timing], threshold: float, candidate: str = "candidate") -> str | None:
    """Flag when the candidate's host time exceeds its event time by much more than the baselines' do."""
    cand = timings.get(candidate)
    if cand is None or cand.host_median_ms is None:
        return None
    extra = cand.host_median_ms - cand.median_ms
    base_extra = max((t.host_median_ms - t.median_ms for n, t in timings.items()
                      if n != candidate and t.host_median_ms is not None), default=0.0)
    excess = extra - max(base_extra, 0.0)
    if excess > threshold * cand.host_median_ms and excess > 0.02:
        return (f"suspicious: host time with full device sync ({cand.host_median_ms:.4g} ms) exceeds the CUDA-event "
                f"time ({cand.median_ms:.4g} ms) by {100 * extra / cand.host_median_ms:.0f}%, more than the baselines; "
                "work may run outside the timed stream")
    return None
