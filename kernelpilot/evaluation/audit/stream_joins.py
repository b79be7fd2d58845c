"""Which side streams of one profiled call are joined to the caller's stream both ways (pure Python).

Work on another stream is honest when the caller's stream cannot tell it apart from its own work:

- **entry**: the side stream's work runs after the work the caller had queued before the call (the side
  stream waits for an event recorded on the caller's stream, or the host waited for that work), so it
  reads the inputs only once they are written and cannot start before the timer's start event;
- **exit**: before ``forward`` returns, the caller's stream waits for an event recorded on the side stream
  after its last launch (or the host waited for the side stream, its event, or the whole device), so the
  timer's end event and the next consumer of the output come after it.

torch.cuda's ``s.wait_stream(torch.cuda.current_stream())`` before the work and
``torch.cuda.current_stream().wait_stream(s)`` after it are the usual way; a chain through further
streams counts too. The evidence is CUPTI's synchronization records (kineto's ``cuda_sync`` events: a
stream wait names the stream its event was recorded on and the correlation id of that ``cudaEventRecord``;
correlation ids grow in launch order), checked against the GPU clock: every side kernel ran after the
marker the caller launched before the call ended and ended before the marker launched after the call
began. A trace without those records (an older profiler) joins nothing, so a side stream stays a finding.
A stream created without ``cudaStreamNonBlocking`` in native code is joined implicitly by the legacy
default stream; CUPTI records no event for that, so it is not recognised (a side-stream finding).

Where the profiler does not say which stream an awaited event was recorded on (a kineto that does not collect
CUPTI's CUDA-event records: ``wait_on_stream`` -1), a wait still counts, from its place in launch order, and the
GPU clock decides: the caller's stream spins for about 0.1 ms before its start marker (kernel_trace.py), so a
side stream that did not really wait for it starts before that marker ends; and a side kernel still running
when the end marker starts was not awaited. (A wait that joins nothing can pass the exit clock only when the
side work was done before the caller went on: the timer saw it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelpilot.evaluation.audit.kernel_trace import KernelTrace

STREAM_WAIT, EVENT_SYNC, STREAM_SYNC, CONTEXT_SYNC = "Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync"
ANY_STREAM = -1  # in ``covered``: a wait on an event of unknown stream covers every stream's earlier launches
_DEVICE_SYNCS = (CONTEXT_SYNC, "Device Sync")


@dataclass(frozen=True)
class SyncEvent:
    """One CUDA synchronization the profiler recorded (kineto's ``cuda_sync`` category)."""

    kind: str  # STREAM_WAIT, EVENT_SYNC, STREAM_SYNC, CONTEXT_SYNC
    correlation: int  # of the API call: cudaStreamWaitEvent, cudaEventSynchronize, ...
    stream: int = -1  # the stream that waits (STREAM_WAIT) or is waited for (STREAM_SYNC); -1: none
    wait_on_stream: int = -1  # the stream the awaited event was recorded on; -1: unknown
    record_correlation: int = -1  # the cudaEventRecord call that recorded it; -1: unknown


def _unknown_source(y: SyncEvent) -> bool:
    """A wait (or host event sync) whose event's stream and record the profiler did not say."""
    return y.kind in (STREAM_WAIT, EVENT_SYNC) and y.wait_on_stream < 0 and y.record_correlation < 0


def _exit_step(y: SyncEvent, covered: dict[int, int]) -> bool:
    """Extend ``covered`` (stream -> launches with a smaller correlation finish before the end marker; key
    ``ANY_STREAM``: every stream, from waits whose event's stream is unknown)."""
    if y.kind == STREAM_WAIT and (y.stream not in covered or y.correlation >= covered[y.stream]):
        return False  # the waiter does not reach the end marker after this wait
    unknown = _unknown_source(y)
    if unknown:  # the wait came after these launches; the clock check confirms it
        target, upto = ANY_STREAM, y.correlation
    elif y.kind in (STREAM_WAIT, EVENT_SYNC):  # the awaited stream's launches before its record
        target, upto = y.wait_on_stream, y.record_correlation
    elif y.kind == STREAM_SYNC:
        target, upto = y.stream, y.correlation
    else:
        return False
    if (target < 0 and not unknown) or upto < 0 or covered.get(target, -1) >= upto:
        return False
    covered[target] = upto
    return True


def _entry_step(y: SyncEvent, ordered: dict[int, int], floor: list[int], spin: bool) -> bool:
    """Extend ``ordered`` (stream -> launches with a larger correlation run after the caller's earlier work).
    ``floor[0]``: a correlation after which the host had waited for that work (every stream is ordered).
    ``spin``: the caller's stream spun before the call, so a wait on an event of unknown stream may order a
    stream (the clock decides)."""
    if y.kind == STREAM_WAIT:
        known = y.wait_on_stream in ordered and y.record_correlation > ordered[y.wait_on_stream]
        if y.stream < 0 or not (known or (spin and _unknown_source(y))):
            return False
        if ordered.get(y.stream, 1 << 62) <= y.correlation:
            return False
        ordered[y.stream] = y.correlation
        return True
    if y.kind in _DEVICE_SYNCS:
        waited = True
    elif y.kind == STREAM_SYNC:
        waited = y.stream in ordered and y.correlation > ordered[y.stream]
    elif y.kind == EVENT_SYNC:
        waited = y.wait_on_stream in ordered and y.record_correlation > ordered[y.wait_on_stream]
    else:
        waited = False
    if not waited or y.correlation >= floor[0]:
        return False
    floor[0] = y.correlation
    return True


def joined_streams(trace: "KernelTrace") -> frozenset[int]:
    """The side streams of ``trace`` joined to its home stream both ways (module docstring)."""
    if (trace.home_stream is None or trace.start_mark is None or trace.end_mark is None or not trace.syncs_recorded
            or len(trace.correlations) != len(trace.kernels) or len(trace.spans) != len(trace.kernels)):
        return frozenset()
    home = trace.home_stream
    start_done, start_corr = trace.start_mark
    end_begins, end_corr = trace.end_mark
    syncs = [y for y in trace.syncs if start_corr < y.correlation < end_corr]  # inside the call
    device_floor = max((y.correlation for y in syncs if y.kind in _DEVICE_SYNCS), default=-1)
    covered: dict[int, int] = {home: end_corr}
    ordered: dict[int, int] = {home: start_corr}
    floor = [1 << 62]
    changed = True
    while changed:
        changed = False
        for y in syncs:
            changed = _exit_step(y, covered) | _entry_step(y, ordered, floor, trace.start_spin) | changed
    by_stream: dict[int, list[int]] = {}
    for i, (_, stream) in enumerate(trace.kernels):
        if stream != home:
            by_stream.setdefault(stream, []).append(i)
    joined = set()
    for stream, indices in by_stream.items():
        first = min(trace.correlations[i] for i in indices)
        last = max(trace.correlations[i] for i in indices)
        entry = first > min(ordered.get(stream, 1 << 62), floor[0])
        exit_ = last < max(covered.get(stream, -1), covered.get(ANY_STREAM, -1), device_floor)
        on_clock = all(start_done <= trace.spans[i][0] and trace.spans[i][1] <= end_begins for i in indices)
        if entry and exit_ and on_clock:
            joined.add(stream)
    return frozenset(joined)
