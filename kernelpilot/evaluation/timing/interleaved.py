"""Timing: eager, torch.compile and the candidate measured interleaved in one run (worker side).

Method, per sample (round-robin over the implementations, the order rotating each sample):

1. pick the next input set from a pool of several sets with distinct storage (kept alive for the whole
   run so addresses are not recycled) and re-draw its float values in place (outside the timed region),
   so a cache keyed on pointers returns stale results and a cache keyed on content never hits;
2. for each implementation: write an L2-flush buffer (>= 2x L2, at least 256 MiB), full device sync,
   then one of two measurements, alternating by sample:
   - **device time** (the reported median): a GPU spin is queued first, long enough to cover the
     host's work for the call, then start event, call, end event. The kernels are already queued when
     the spin ends, so the events see GPU execution only, not Python, dispatch or guard overhead (which
     would otherwise favour a thin pybind call over torch.compile's wrapper);
   - **launch-inclusive** (idle GPU): host clock, start event, call, end event, full device sync, host
     clock. Its event median (``launch_median_ms``) shows the launch overhead; its host median is the
     cross-check against work outside the timed stream (see ``host_gap_flag``);
3. for a sample of calls, keep the candidate's and eager's outputs on the same inputs and compare them
   after the timed region (result replay shows up as a mismatch).

Per implementation: median, IQR, min of the device times; launch-inclusive and host medians; round
medians for a noise estimate (half the range of round medians, percent of the median). Timers are the
objects captured when the worker started (``Pristine``), so a candidate that patches ``time`` or
``torch.cuda.Event`` does not change what the harness reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelpilot.evaluation.worker import watchdog
from kernelpilot.verdict import Timing

if TYPE_CHECKING:
    import torch

    from kernelpilot.evaluation.correctness.compare import Outputs
    from kernelpilot.evaluation.correctness.inputs import Inputs
    from kernelpilot.evaluation.correctness.reference import Forward

MIN_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass
class Pristine:
    """Timer and sync functions captured before any candidate code ran."""

    perf_counter: Callable[[], float]
    event_cls: type[torch.cuda.Event]
    record: Callable[..., object]
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
    hide_launch: bool = True  # device time behind a GPU spin (False: every sample launch-inclusive)

MAX_SPIN_MS = 50.0


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


def summarise(event_ms: list[float], host_ms: list[float], rounds: list[list[float]],
              launch_ms: list[float] | None = None) -> Timing:
    ordered = sorted(event_ms)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return Timing(median_ms=statistics.median(ordered), q1_ms=q[0], q3_ms=q[2], min_ms=ordered[0],
                  samples=len(ordered), host_median_ms=statistics.median(host_ms) if host_ms else None,
                  launch_median_ms=statistics.median(launch_ms) if launch_ms else None,
                  round_medians_ms=[statistics.median(r) for r in rounds if r])


@dataclass
class Spin:
    """A GPU busy-wait queued before each device-timed call, sized to outlast the host's issue time."""

    cycles_per_ms: float
    ms: float
    short: dict[str, int] = field(default_factory=dict)  # per implementation: calls whose issue outlasted the spin

    @classmethod
    def calibrate(cls, pristine: "Pristine", issue_ms: float) -> "Spin | None":
        import torch

        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is None:
            return None
        start, end = pristine.event_cls(enable_timing=True), pristine.event_cls(enable_timing=True)
        probe = 1_000_000
        sleep(probe // 10)  # first call loads the kernel
        pristine.synchronize()
        pristine.record(start)
        sleep(probe)
        pristine.record(end)
        pristine.synchronize()
        ms = float(pristine.elapsed(start, end))
        if ms <= 0:
            return None
        return cls(cycles_per_ms=probe / ms, ms=max(cls.covering(issue_ms), 0.1))

    @staticmethod
    def covering(issue_ms: float) -> float:
        """A spin (ms) that outlasts a host issue time of ``issue_ms``, with margin; at most MAX_SPIN_MS."""
        return min(2.0 * issue_ms + 0.05, MAX_SPIN_MS)

    def queue(self) -> None:
        import torch

        torch.cuda._sleep(int(self.ms * self.cycles_per_ms))

    def saw(self, name: str, issue_ms: float) -> None:
        if issue_ms > self.ms:
            # a slow host path, or a forward that waits for the GPU (a sync inside it): the rest of the
            # call is issued on an idle GPU, so its time includes that launch overhead
            self.short[name] = self.short.get(name, 0) + 1
            self.ms = max(self.ms, self.covering(issue_ms))


def noise_pct(timing: Timing) -> float | None:
    r = timing.round_medians_ms
    if len(r) < 2 or timing.median_ms <= 0:
        return None
    return 100.0 * (max(r) - min(r)) / (2.0 * timing.median_ms)


def _graphed(fn: Forward, static: Inputs) -> Forward:
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

    def replay(*_args: object) -> Outputs:
        graph.replay()
        return out

    return replay


def measure(impls: dict[str, Forward], pool: list[Inputs], refill: Callable[[Inputs], None],
            settings: TimingSettings, pristine: Pristine, device: str,
            check: Callable[[object, Outputs], str] | None = None,
            checked: tuple[str, str] = ("candidate", "eager")) -> TimingRun:
    """Time every implementation interleaved. ``check(candidate_out, eager_out)`` returns "" when they agree."""
    run = TimingRun()
    names = list(impls)
    calls, pool, flush, spin = _prepare(impls, pool, settings, pristine, device, run.notes)
    if settings.hide_launch and spin is None and device.startswith("cuda"):
        run.notes.append("torch.cuda._sleep is unavailable: timings include the host's launch overhead")
    total = settings.rounds * settings.samples_per_round
    check_every = max(total // max(settings.replay_checks, 1), 1) if check else 0
    samples = _Samples(names)
    sample = 0
    for r in range(settings.rounds):
        samples.new_round()
        with watchdog.calls("timing", f"timed calls, round {r + 1} of {settings.rounds}",
                            n=settings.samples_per_round * len(names)):
            for _s in range(settings.samples_per_round):
                inputs = pool[sample % len(pool)]
                refill(inputs)
                order = names[sample % len(names):] + names[: sample % len(names)]
                keep = check is not None and sample % check_every == 0
                device_timed = spin is not None and (sample % 2 == 0 or keep)
                outs: dict[str, object] = {}
                for name in order:
                    out, ms, issue_ms, host_ms = _timed_call(calls[name], inputs, flush, pristine,
                                                             spin if device_timed else None)
                    if device_timed and spin is not None:
                        spin.saw(name, issue_ms)
                    samples.add(name, ms, host_ms, device_timed, spin is not None)
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
        run.timings[name] = summarise(samples.event_ms[name], samples.host_ms[name], samples.rounds[name],
                                      samples.launch_ms[name])
    if spin is not None:
        run.notes += _spin_notes(spin, samples.event_ms)
    return run


def _prepare(impls: dict[str, Forward], pool: list[Inputs], settings: TimingSettings, pristine: Pristine,
             device: str, notes: list[str]) -> tuple[dict[str, Forward], list[Inputs], torch.Tensor, Spin | None]:
    """Before the timed calls, under the watchdog's allowance for them: each implementation captured in a CUDA
    graph (with ``cuda_graphs``; then its one static input set is the pool), the L2-flush buffer, the warm-up
    calls and the spin's calibration. The calls to time, the pool, the flush buffer and the spin."""
    import torch

    names = list(impls)
    calls = dict(impls)
    warm_calls = (max(settings.warmup, 1) + 4 + (6 if settings.cuda_graphs else 0)) * len(names)
    with watchdog.calls("timing", "warm-up, CUDA-graph capture and spin calibration", n=warm_calls):
        if settings.cuda_graphs:
            static = pool[0]
            for name in names:
                try:
                    calls[name] = _graphed(impls[name], static)
                except Exception as exc:  # capture refused (host sync, allocation): time it eagerly
                    notes.append(f"CUDA graph capture failed for {name} ({type(exc).__name__}); timed without graphs")
            pool = [static]
        flush = torch.empty(flush_buffer_bytes(device, settings.flush_bytes) // 4, dtype=torch.int32, device=device)
        with torch.no_grad():
            for i in range(max(settings.warmup, 1)):
                for name in names:
                    calls[name](*pool[i % len(pool)])
        pristine.synchronize()
        spin = _spin_for(calls, pool[0], pristine, device) if settings.hide_launch else None
    return calls, pool, flush, spin


def _timed_call(fn: Forward, inputs: Inputs, flush: torch.Tensor, pristine: Pristine,
                spin: Spin | None) -> tuple[Outputs, float, float, float]:
    """One timed call: L2 flushed, the device synchronised, ``spin`` queued first when given (a device-timed
    sample), the call between two events. Its output, the events' ms, and the host's ms to issue the call and
    to see it finished."""
    import torch

    flush.zero_()
    start, end = pristine.event_cls(enable_timing=True), pristine.event_cls(enable_timing=True)
    pristine.synchronize()
    if spin is not None:
        spin.queue()
    h0 = pristine.perf_counter()
    pristine.record(start)
    with torch.no_grad():
        out = fn(*inputs)
    issued = pristine.perf_counter()
    pristine.record(end)
    pristine.synchronize()
    h1 = pristine.perf_counter()
    return out, float(pristine.elapsed(start, end)), (issued - h0) * 1000.0, (h1 - h0) * 1000.0


class _Samples:
    """Each implementation's timed calls: device times (behind the spin; every call when there is no spin),
    launch-inclusive event and host times, and the device times of each round."""

    def __init__(self, names: list[str]) -> None:
        self.event_ms: dict[str, list[float]] = {n: [] for n in names}
        self.launch_ms: dict[str, list[float]] = {n: [] for n in names}
        self.host_ms: dict[str, list[float]] = {n: [] for n in names}
        self.rounds: dict[str, list[list[float]]] = {n: [] for n in names}

    def new_round(self) -> None:
        for r in self.rounds.values():
            r.append([])

    def add(self, name: str, ms: float, host_ms: float, device_timed: bool, spin: bool) -> None:
        if device_timed:
            self.event_ms[name].append(ms)
            self.rounds[name][-1].append(ms)
            return
        self.launch_ms[name].append(ms)
        self.host_ms[name].append(host_ms)
        if not spin:  # no spin at all: launch-inclusive times are the only device times there are
            self.event_ms[name].append(ms)
            self.rounds[name][-1].append(ms)


def _spin_notes(spin: Spin, event_ms: dict[str, list[float]]) -> list[str]:
    """An odd slow issue (the spin then grows) is not worth a flag; a pattern is."""
    notes = []
    for name, count in spin.short.items():
        if count < max(3, len(event_ms[name]) // 10):
            continue
        notes.append(f"{name}: {count} of {len(event_ms[name])} device-timed calls took longer to issue on the "
                     f"host than the GPU spin before them (a host sync inside forward, or slow Python); "
                     "those times include launch overhead")
    return notes


def _spin_for(calls: dict[str, Forward], inputs: Inputs, pristine: Pristine, device: str) -> Spin | None:
    """Calibrate the spin from the slowest host issue time (no sync inside the call) of any implementation."""
    import torch

    if not device.startswith("cuda"):
        return None
    issue = 0.0
    with torch.no_grad():
        for _ in range(3):
            for fn in calls.values():
                t0 = pristine.perf_counter()
                out = fn(*inputs)
                issue = max(issue, (pristine.perf_counter() - t0) * 1000.0)
                del out
                pristine.synchronize()
    return Spin.calibrate(pristine, issue)


def times_behind_spin(fn: Callable[[], object], reps: int, flush: torch.Tensor | None = None) -> list[float]:
    """Sorted CUDA-event times (ms) of ``reps`` calls of a warmed-up ``fn``, each queued behind a GPU spin.

    For measurements outside the worker (the ceilings, ``examples/bench_sweep.py``): per call, the
    optional L2 flush, a full sync, the spin, then start event, call, end event, as ``measure`` times
    its device-timed samples.
    """
    pristine = Pristine.capture()
    spin = _spin_for({"fn": fn}, [], pristine, "cuda")
    times = []
    for _ in range(reps):
        start, end = pristine.event_cls(enable_timing=True), pristine.event_cls(enable_timing=True)
        if flush is not None:
            flush.zero_()
        pristine.synchronize()
        if spin is not None:
            spin.queue()
        pristine.record(start)
        fn()
        pristine.record(end)
        pristine.synchronize()
        times.append(float(pristine.elapsed(start, end)))
    return sorted(times)


def _snapshot(out: object) -> object:
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

    def event(t: Timing) -> float:  # the event time of the same (launch-inclusive) calls as the host clock
        return t.launch_median_ms if t.launch_median_ms is not None else t.median_ms

    extra = cand.host_median_ms - event(cand)
    base_extra = max((t.host_median_ms - event(t) for n, t in timings.items()
                      if n != candidate and t.host_median_ms is not None), default=0.0)
    excess = extra - max(base_extra, 0.0)
    if excess > threshold * cand.host_median_ms and excess > 0.02:
        return (f"suspicious: host time with full device sync ({cand.host_median_ms:.4g} ms) exceeds the CUDA-event "
                f"time ({event(cand):.4g} ms) by {100 * extra / cand.host_median_ms:.0f}%, more than the baselines; "
                "work may run outside the timed stream")
    return None
