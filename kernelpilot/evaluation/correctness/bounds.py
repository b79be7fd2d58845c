"""Writes past a tensor's end, caught with guard bands in the caching allocator's spare memory (worker side).

A kernel launched for more threads than elements, with no bound check (KernelBench's own CuTe example launches
256 threads for a 1 x 128 input), writes past its output into memory the allocator holds but has handed to no
tensor. The values compared are right, so the value check passes. compute-sanitizer sees it but costs tens of
seconds a run (it gates approval). The first call of each shape set is guarded instead:

1. Before the call, the allocator's snapshot names every byte it holds that no tensor owns. These are free
   blocks, and the tail of a block past the size its tensor asked for. A run of such bytes starts where a tensor
   ends. Each run is filled with a canary of its own: a float32 quiet NaN whose payload numbers the run. A copy
   that reads past one tensor's end and writes past another's leaves the wrong canary, and arithmetic on a
   canary gives the GPU's canonical NaN.
2. The allocator's history records every allocation the call makes, with its requested size.
3. After the call, the first ``GUARD_BYTES`` of each run and the ``GUARD_BYTES`` past the end of each
   allocation the call made, less what the call allocated, are read back. A changed byte is a write past the
   end of the tensor before it.

Bands are filled and read through one alias per allocator segment (a band is a slice of it), and everything
read back is copied into one pinned host buffer without a device allocation (which would land on the bands):
one synchronisation per guarded call, however many bands (up to ``MAX_BANDS``).

Not seen: reads out of bounds, writes that land in another live tensor, and writes past a segment's end (an
output that fills a segment of its own; the verify phase's poisoning leaves a free block four times the largest
input, so outputs are carved from it). Segments of CUDA-graph pools are
left alone: a graph's replay writes there legitimately and allocates nothing. ``KERNELPILOT_BOUNDS_CHECK=0``
turns the check off and the verdict says so. If the check cannot run, the trial fails: it fails closed.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

GUARD_BYTES = 256 << 10  # read back: the first 256 KiB past each tensor's end
TOTAL_BYTES = 64 << 20  # read back in all, per call
MAX_BANDS = 4096
_NAN = 0x7FC00000  # float32 quiet NaN; a payload below 0x3FFFFF numbers each band (never 0: that is the poison)


@dataclass(frozen=True)
class Run:
    """``[start, end)``: bytes the allocator holds that no tensor owns (one free block, or one block's tail past
    its tensor's size). The tensor before it ends at ``owner_end`` and asked for ``owner_bytes`` (-1: none, the
    run opens a segment)."""

    start: int
    end: int
    owner_end: int
    owner_bytes: int


@dataclass(frozen=True)
class Band:
    """``[start, end)`` is filled with ``canary`` (an int32) before the call."""

    start: int
    end: int
    canary: int


@dataclass(frozen=True)
class Overrun:
    """Changed bytes ``first``..``last`` past the end of the nearest tensor before them."""

    first: int
    last: int
    owner_bytes: int
    made_in_call: bool

    def describe(self) -> str:
        if self.owner_bytes < 0:
            return f"a write out of bounds: {self.last - self.first + 1} bytes the allocator had handed to no tensor"
        whose = ("allocated during the call (an output or a temporary)" if self.made_in_call
                 else "that existed before the call (an input, a parameter, a buffer)")
        return (f"a write out of bounds: bytes {self.first}-{self.last} past the end of a {self.owner_bytes}-byte "
                f"tensor {whose} were changed")


def enabled() -> bool:
    return os.environ.get("KERNELPILOT_BOUNDS_CHECK", "1") != "0"


def _blocks(segment: dict[str, Any]) -> Iterable[tuple[int, int, int, bool]]:
    """(address, size, requested, active) of a segment's blocks, in address order."""
    address = int(segment["address"])
    for block in segment.get("blocks", []):
        start = int(block.get("address", address))
        size = int(block["size"])
        active = str(block.get("state", "")).startswith("active")
        requested = int(block.get("requested_size", size)) if active else 0
        yield start, size, requested, active
        address = start + size


def spare_runs(segments: list[dict[str, Any]]) -> list[Run]:
    """Every free block and every block's tail past its tensor's size, in the default pool's segments (a CUDA
    graph's private pool is written by its replays without allocating). Each is a run of its own, with a canary
    of its own: a copy past one tensor's tail into the free block after another leaves the wrong one."""
    runs: list[Run] = []
    for segment in sorted(segments, key=lambda s: int(s["address"])):
        if tuple(segment.get("segment_pool_id", (0, 0))) != (0, 0):
            continue
        owner_end, owner_bytes = -1, -1
        for start, size, requested, active in _blocks(segment):
            if active:
                owner_end, owner_bytes = start + requested, requested
                if requested < size:
                    runs.append(Run(start + requested, start + size, owner_end, owner_bytes))
            else:
                runs.append(Run(start, start + size, owner_end, owner_bytes))
                owner_end, owner_bytes = -1, -1
    return runs


def guard_bands(runs: list[Run], *, max_bands: int = MAX_BANDS) -> list[Band]:
    """Each run, 4-byte aligned, with its own canary (the first ``max_bands`` runs)."""
    bands: list[Band] = []
    for run in runs:
        lo, hi = (run.start + 3) & ~3, run.end & ~3
        if hi > lo:
            bands.append(Band(lo, hi, _NAN | (len(bands) % 0x3FFFFE + 1)))
        if len(bands) >= max_bands:
            break
    return bands


def allocations(trace: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """``[start, end)`` of every allocation in the allocator's history (requested sizes)."""
    return sorted((int(e["addr"]), int(e["addr"]) + int(e["size"])) for e in trace if e.get("action") == "alloc")


def new_segments(trace: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """``[start, end)`` of memory the allocator took from the driver during the call (it may reuse the address
    of a segment ``empty_cache`` gave back: no canary there)."""
    return sorted((int(e["addr"]), int(e["addr"]) + int(e["size"])) for e in trace
                  if e.get("action") in ("segment_alloc", "segment_map"))


def _minus(ranges: list[tuple[int, int]], taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` less the ``taken`` ranges (sorted)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        cursor = lo
        for a, b in taken:
            if b <= cursor or a >= hi:
                continue
            if a > cursor:
                out.append((cursor, a))
            cursor = max(cursor, b)
        if cursor < hi:
            out.append((cursor, hi))
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``ranges``, sorted, overlapping and touching ones joined."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _within(ranges: list[tuple[int, int]], keep: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` intersected with ``keep`` (sorted and disjoint, as ``_merge`` gives it): each range meets only
    the kept ranges from the one that holds its start on."""
    starts = [a for a, _ in keep]
    return [(max(lo, a), min(hi, b)) for lo, hi in ranges
            for a, b in keep[max(bisect.bisect_right(starts, lo) - 1, 0):bisect.bisect_left(starts, hi)]
            if min(hi, b) > max(lo, a)]


def to_read(bands: list[Band], made: list[tuple[int, int]], segments_after: list[dict[str, Any]], *,
            window: int = GUARD_BYTES, total_bytes: int = TOTAL_BYTES) -> list[tuple[int, int, int]]:
    """(start, end, the int32 expected there) of what to read back after the call: the first ``window`` bytes
    of each band and the ``window`` bytes past the end of each allocation the call made, less what the call
    allocated, within the bands and the segments still mapped."""
    mapped = [(int(s["address"]), int(s["address"]) + int(s.get("total_size", 0))) for s in segments_after]
    windows = [(band.start, band.start + window) for band in bands] + [(b, b + window) for _a, b in made]
    free = _within(_minus(_merge(windows), made), _merge(mapped))
    starts = [band.start for band in bands]  # the bands are disjoint and in address order (spare_runs' order)
    out: set[tuple[int, int, int]] = set()
    for lo, hi in free:  # each window meets only the bands from the one that holds its start on
        for band in bands[max(bisect.bisect_right(starts, lo) - 1, 0):bisect.bisect_left(starts, hi)]:
            a, b = (max(lo, band.start) + 3) & ~3, min(hi, band.end) & ~3
            if b > a:
                out.add((a, b, band.canary))
    chosen, total = [], 0
    for lo, hi, value in sorted(out):
        chosen.append((lo, hi, value))
        total += hi - lo
        if total >= total_bytes:
            break
    return chosen


def overrun(first_bad: int, last_bad: int, runs: list[Run], made: list[tuple[int, int]]) -> Overrun:
    """Describe changed bytes ``first_bad``..``last_bad`` (addresses): counted from the end of the nearest tensor
    before them, whether the call allocated it or it existed before."""
    end, owner_bytes, made_in_call = -1, -1, False
    for run in runs:
        if run.start <= first_bad < run.end and run.owner_bytes >= 0:
            end, owner_bytes = run.owner_end, run.owner_bytes
    for a, b in made:
        if end <= b <= first_bad:
            end, owner_bytes, made_in_call = b, b - a, True
    if end < 0:
        return Overrun(0, last_bad - first_bad, -1, False)
    return Overrun(first_bad - end, last_bad - end, owner_bytes, made_in_call)


def split_at(ranges: list[tuple[int, int, int]], spans: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``ranges`` (start, end, value) cut where they cross from one span (a segment: sorted, disjoint) into the
    next, so that each piece lies in one segment; what lies in no span is dropped."""
    starts = [a for a, _ in spans]
    out: list[tuple[int, int, int]] = []
    for lo, hi, value in ranges:
        for a, b in spans[max(bisect.bisect_right(starts, lo) - 1, 0):bisect.bisect_left(starts, hi)]:
            if min(hi, b) > max(lo, a):
                out.append((max(lo, a), min(hi, b), value))
    return out


def changed(host: torch.Tensor, pieces: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """(first, last) changed byte addresses of each piece whose int32 words in ``host`` (the pieces read back one
    after the other, on the CPU) are not its value.

    The comparison runs in numpy, on the calling thread: each piece compared with torch would open two of torch's
    parallel regions, and while the SASS check's nvcc runs beside a verification each region waited for a
    descheduled thread (2026-12-06, H200: 1.63 s of a 2.35 s verification, 233 regions). numpy's comparisons
    use no thread pool. A piece is searched only when something in it changed."""
    import numpy as np

    words = host.numpy()
    found = []
    at = 0
    for lo, hi, value in pieces:
        n = (hi - lo) // 4
        differ = words[at:at + n] != np.int32(value)
        at += n
        if not differ.any():
            continue
        bad = np.flatnonzero(differ)
        found.append((lo + 4 * int(bad[0]), lo + 4 * int(bad[-1]) + 3))
    return found


# ---- on the GPU -----------------------------------------------------------------------------------
class _Memory:
    """Raw device memory as an int32 array (``__cuda_array_interface__``), for a tensor that aliases it."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes // 4,), "typestr": "<i4", "data": (ptr, False),
                                         "version": 2, "strides": None}


def _alias(ptr: int, nbytes: int, device: str) -> torch.Tensor:
    import torch

    return torch.as_tensor(_Memory(ptr, nbytes), device=device)


def _spans(segments: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return sorted((int(s["address"]), int(s["address"]) + int(s.get("total_size", 0))) for s in segments
                  if int(s.get("total_size", 0)) > 0)


class _Segments:
    """One int32 alias per segment of the allocator, made on first use: a band or a range read back is a slice of
    it (a view costs far less than an alias of its own)."""

    def __init__(self, spans: list[tuple[int, int]], device: str) -> None:
        self.spans, self.device = spans, device
        self.starts = [a for a, _ in spans]
        self.aliases: dict[int, torch.Tensor] = {}

    def __call__(self, lo: int, hi: int) -> torch.Tensor:
        i = bisect.bisect_right(self.starts, lo) - 1
        a, b = self.spans[i] if i >= 0 else (0, 0)
        if not a <= lo < hi <= b:
            raise ValueError(f"bytes {lo:#x}-{hi:#x} are not inside one of the allocator's segments")
        if i not in self.aliases:
            self.aliases[i] = _alias(a, b - a, self.device)
        return self.aliases[i][(lo - a) // 4:(hi - a) // 4]


def fill(bands: list[Band], segments: list[dict[str, Any]], device: str) -> None:
    """Each band filled with its canary, through the aliases of the segments that hold them."""
    views = _Segments(_spans(segments), device)
    for band in bands:
        views(band.start, band.end).fill_(band.canary)


def read_changes(ranges: list[tuple[int, int, int]], segments: list[dict[str, Any]],
                 device: str) -> list[tuple[int, int]]:
    """(first, last) changed byte addresses per piece of ``ranges`` (start, end, expected int32): every piece
    copied into one pinned host buffer and synchronised once, however many bands."""
    import torch

    spans = _spans(segments)
    pieces = split_at(ranges, spans)
    if not pieces:
        return []
    views = _Segments(spans, device)
    # Copied straight into (pinned) host memory, never gathered on the device: a device buffer would be carved from
    # the free blocks that hold the bands, and the gather would overwrite the bytes it reads (2026-12-06, H100:
    # every honest candidate was judged to write 256 KiB out of bounds).
    host = torch.empty(sum(hi - lo for lo, hi, _ in pieces) // 4, dtype=torch.int32,
                       pin_memory=device != "cpu" and torch.cuda.is_available())
    at = 0
    for lo, hi, _ in pieces:
        host[at:at + (hi - lo) // 4].copy_(views(lo, hi), non_blocking=True)
        at += (hi - lo) // 4
    if device != "cpu":
        torch.cuda.synchronize(device)
    return changed(host, pieces)


class BoundsCheckError(RuntimeError):
    """The guard could not be set or read (the allocator's snapshot or history): the trial fails closed."""


def guarded(call: Callable[[], Any], device: str) -> tuple[Any, list[Overrun], str]:
    """Run ``call`` with guard bands past every tensor's end: its result, the overruns seen, and why the
    bands could not be read back ("" when they were).

    Whatever ``call`` raises passes through; a failure to set the bands raises BoundsCheckError before
    ``call`` runs."""
    import torch

    history = torch.cuda.memory._record_memory_history
    try:
        torch.cuda.synchronize()
        segments = torch.cuda.memory_snapshot()
        runs = spare_runs(segments)
        bands = guard_bands(runs)
        fill(bands, segments, device)
        torch.cuda.synchronize()
        history(enabled="all", context=None, stacks="python", max_entries=1 << 20, clear_history=True)
    except Exception as exc:  # noqa: BLE001 - any failure to set the guard fails the trial closed
        raise BoundsCheckError(f"{type(exc).__name__}: {exc}") from exc
    try:
        result = call()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        history(enabled=None)
    try:
        return result, _read_back(runs, bands, snap, device), ""
    except Exception as exc:  # noqa: BLE001 - the caller fails the trial closed
        return result, [], f"{type(exc).__name__}: {exc}"


def _read_back(runs: list[Run], bands: list[Band], snap: dict[str, Any], device: str) -> list[Overrun]:
    import torch
    index = torch.device(device).index
    traces = snap.get("device_traces", [])
    trace = traces[index if index is not None else torch.cuda.current_device()] if traces else []
    made = allocations(trace)
    segments = snap.get("segments", [])
    ranges = to_read(bands, _merge(made + new_segments(trace)), segments)
    return [overrun(first, last, runs, made) for first, last in read_changes(ranges, segments, device)]
