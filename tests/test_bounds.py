"""Guard bands for writes out of bounds (kernelpilot/evaluation/correctness/bounds.py), on a simulated allocator.

The GPU half (filling and reading device memory) runs in tests/gpu/test_adversarial.py (``out_of_bounds_write``
and its Triton twin) and on KernelBench's CuTe example (benchmarks/cute_gpu.sh). Here the allocator's snapshot
and history are built by hand, and a bytearray stands for the device memory, so the arithmetic that decides
what is read back, and what a changed byte means, is checked exactly.
"""

from __future__ import annotations

import struct
from unittest import mock

import pytest
import torch

from kernelpilot.evaluation.correctness import bounds

BASE = 1 << 20


def _segment(address: int, blocks: list[tuple[int, int | None]], pool: tuple[int, int] = (0, 0)) -> dict:
    """A snapshot segment: blocks as (size, requested or None for a free block)."""
    out, cursor = [], address
    for size, requested in blocks:
        block = {"address": cursor, "size": size, "state": "inactive" if requested is None else "active_allocated"}
        if requested is not None:
            block["requested_size"] = requested
        out.append(block)
        cursor += size
    return {"address": address, "total_size": cursor - address, "blocks": out, "segment_pool_id": pool}


class Memory:
    """Device memory for one segment, filled and read back by bounds.py's own GPU half (``fill``,
    ``read_changes``), with a CPU tensor over the bytearray standing for the segment's alias."""

    def __init__(self, seg: dict) -> None:
        self.seg, self.base = seg, seg["address"]
        self.data = bytearray(b"\x11" * seg["total_size"])
        self.runs = bounds.spare_runs([seg])
        self.bands = bounds.guard_bands(self.runs)
        with mock.patch.object(bounds, "_alias", self._alias):
            bounds.fill(self.bands, [seg], "cpu")

    def _alias(self, ptr: int, nbytes: int, device: str) -> torch.Tensor:
        assert device == "cpu" and self.base <= ptr and ptr + nbytes <= self.base + len(self.data)
        return torch.frombuffer(self.data, dtype=torch.int32, offset=ptr - self.base, count=nbytes // 4)

    def write(self, start: int, payload: bytes) -> None:
        self.data[start - self.base:start - self.base + len(payload)] = payload

    def overruns(self, made: list[tuple[int, int]]) -> list[bounds.Overrun]:
        with mock.patch.object(bounds, "_alias", self._alias):
            changes = bounds.read_changes(bounds.to_read(self.bands, made, [self.seg]), [self.seg], "cpu")
        return [bounds.overrun(first, last, self.runs, made) for first, last in changes]


def test_every_band_holds_its_canary_after_the_fill() -> None:
    seg = _segment(BASE, [(1024, 1000), (4096, None), (512, 512), (2048, None)])
    mem = Memory(seg)
    assert len(mem.bands) == 3
    for band in mem.bands:
        words = struct.unpack(f"<{(band.end - band.start) // 4}i", bytes(mem.data[band.start - BASE:band.end - BASE]))
        assert set(words) == {band.canary}
    assert bytes(mem.data[0:1000]) == b"\x11" * 1000  # the tensor itself is untouched


def test_pieces_are_cut_at_segment_boundaries_and_changes_found_per_piece() -> None:
    spans = [(BASE, BASE + 4096), (BASE + 4096, BASE + 8192), (BASE + 16384, BASE + 20480)]
    pieces = bounds.split_at([(BASE + 4000, BASE + 4200, 7), (BASE + 9000, BASE + 9100, 8),
                              (BASE + 16384, BASE + 16400, 9)], spans)
    assert pieces == [(BASE + 4000, BASE + 4096, 7), (BASE + 4096, BASE + 4200, 7), (BASE + 16384, BASE + 16400, 9)]
    host = torch.tensor([7] * 24 + [7] * 26 + [9] * 4, dtype=torch.int32)
    assert bounds.changed(host, pieces) == []
    host[2], host[5], host[30], host[53] = 0, 0, 0, 0
    assert bounds.changed(host, pieces) == [(BASE + 4008, BASE + 4023), (BASE + 4096 + 24, BASE + 4096 + 27),
                                            (BASE + 16384 + 12, BASE + 16384 + 15)]


def test_the_read_back_is_compared_without_torchs_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each piece compared with torch opened parallel regions that waited on threads the SASS check's nvcc had
    descheduled (1.6 s a kernel edit on the H200): the comparison must not go through torch's operators."""
    pieces = [(BASE, BASE + 4096, 5), (BASE + 8192, BASE + 8192 + 64, 6)]
    host = torch.tensor([5] * 1024 + [6] * 16, dtype=torch.int32)
    host[1024 + 3] = -1

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the band comparison went through torch")

    for name in ("__ne__", "ne", "any", "nonzero"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    assert bounds.changed(host, pieces) == [(BASE + 8192 + 12, BASE + 8192 + 15)]


def test_a_range_outside_every_segment_is_refused_not_read() -> None:
    seg = _segment(BASE, [(512, 512), (4096, None)])
    views = bounds._Segments(bounds._spans([seg]), "cpu")
    with pytest.raises(ValueError, match="not inside one of the allocator's segments"):
        views(BASE + 4096, BASE + 4608 + 4)


def test_runs_are_free_blocks_and_the_tails_past_what_a_tensor_asked_for() -> None:
    seg = _segment(BASE, [(512, 500), (1024, None), (512, 512), (512, None), (1536, 1100)])
    runs = bounds.spare_runs([seg])
    assert runs == [bounds.Run(BASE + 500, BASE + 512, BASE + 500, 500),
                    bounds.Run(BASE + 512, BASE + 1536, BASE + 500, 500),
                    bounds.Run(BASE + 2048, BASE + 2560, BASE + 2048, 512),
                    bounds.Run(BASE + 2560 + 1100, BASE + 4096, BASE + 3660, 1100)]
    bands = bounds.guard_bands(runs)
    assert [(b.start, b.end) for b in bands] == [(BASE + 500, BASE + 512), (BASE + 512, BASE + 1536),
                                                 (BASE + 2048, BASE + 2560), (BASE + 3660, BASE + 4096)]
    canaries = [b.canary for b in bands]
    assert len(set(canaries)) == 4 and all(c & 0x7FC00000 == 0x7FC00000 and c != 0x7FC00000 for c in canaries)
    free_first = _segment(BASE, [(1024, None), (512, 512)])
    assert bounds.spare_runs([free_first]) == [bounds.Run(BASE, BASE + 1024, -1, -1)]


def test_a_cuda_graph_pool_is_left_alone() -> None:
    assert bounds.spare_runs([_segment(BASE, [(512, 100), (512, None)], pool=(1, 0))]) == []


def test_kernelbench_cute_example_pattern_is_caught() -> None:
    """256 threads for 128 floats: the output (512 B, allocated in the call from a free block) is written
    twice as far. The write lands on the band that opened where the free block began."""
    seg = _segment(BASE, [(512, 512), (512, 512), (2 << 20, None)])  # the inputs, then a free block
    mem = Memory(seg)
    out = BASE + 1024
    made = [(out, out + 512)]
    mem.write(out, b"\x00" * 1024)  # 128 floats inside, 128 past the end
    found = mem.overruns(made)
    assert len(found) == 1
    assert (found[0].first, found[0].last, found[0].owner_bytes, found[0].made_in_call) == (0, 511, 512, True)
    assert "bytes 0-511 past the end of a 512-byte tensor allocated during the call" in found[0].describe()
    mem.write(out + 512, struct.pack("<i", mem.bands[0].canary) * 128)  # put the band back: nothing is seen
    assert mem.overruns(made) == []


def test_a_copy_past_an_input_into_past_the_output_leaves_the_wrong_canary() -> None:
    seg = _segment(BASE, [(1024, 1000), (4096, None)])  # an input with a 24-byte tail, then free memory
    mem = Memory(seg)
    out = BASE + 1024
    made = [(out, out + 1000)]
    # a copy kernel of 1024 bytes from the input into the output: its last 24 bytes read the input's tail
    mem.write(out, bytes(mem.data[0:1024]))
    found = mem.overruns(made)
    assert [(f.first, f.last, f.made_in_call) for f in found] == [(0, 23, True)]


def test_temporaries_the_call_allocated_and_freed_are_not_overruns() -> None:
    seg = _segment(BASE, [(512, 512), (8192, None)])
    mem = Memory(seg)
    made = [(BASE + 512, BASE + 512 + 4096), (BASE + 512 + 4096, BASE + 512 + 4096 + 100)]
    mem.write(BASE + 512, b"\x07" * 4196)  # a 4 KiB temporary, freed, and a 100-byte output after it
    assert mem.overruns(made) == []
    mem.write(BASE + 512 + 4196, b"\x07" * 8)  # 8 bytes past the 100-byte output
    found = mem.overruns(made)
    assert [(f.first, f.last, f.owner_bytes) for f in found] == [(0, 7, 100)]


def test_an_allocation_placed_past_the_window_is_guarded_at_its_own_end() -> None:
    size = 4 << 20
    seg = _segment(BASE, [(512, 512), (size, None)])
    mem = Memory(seg)
    start = BASE + 512
    made = [(start, start + (2 << 20))]  # a 2 MiB output: its end is far past the first window
    mem.write(start + (2 << 20), b"\x00" * 64)
    found = mem.overruns(made)
    assert [(f.first, f.last, f.owner_bytes, f.made_in_call) for f in found] == [(0, 63, 2 << 20, True)]


def test_a_segment_released_during_the_call_is_not_read() -> None:
    seg = _segment(BASE, [(512, 512), (4096, None)])
    runs = bounds.spare_runs([seg])
    bands = bounds.guard_bands(runs)
    assert bounds.to_read(bands, [], [seg])
    assert bounds.to_read(bands, [], []) == []  # empty_cache inside the call: the segment is gone


def test_history_gives_requested_sizes_of_allocations_only() -> None:
    trace = [{"action": "alloc", "addr": 4096, "size": 100}, {"action": "free_requested", "addr": 4096, "size": 100},
             {"action": "segment_alloc", "addr": 0, "size": 1 << 21}, {"action": "alloc", "addr": 512, "size": 8}]
    assert bounds.allocations(trace) == [(512, 520), (4096, 4196)]


def test_reading_back_is_bounded() -> None:
    segs = [_segment(BASE * (i + 1) * 8, [(512, 100), (1 << 20, None)]) for i in range(8)]
    runs = bounds.spare_runs(segs)
    bands = bounds.guard_bands(runs)
    parts = bounds.to_read(bands, [], segs, window=1 << 16, total_bytes=200_000)
    assert sum(hi - lo for lo, hi, _ in parts) < 200_000 + (1 << 16)


@pytest.mark.parametrize("value", ["0", "1"])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("KERNELPILOT_BOUNDS_CHECK", value)
    assert bounds.enabled() is (value == "1")


def test_windows_are_matched_to_bands_as_every_pair_would_be() -> None:
    """to_read meets each window with the bands and mapped segments around it only (thousands of bands and
    windows were a quadratic loop); it gives exactly what meeting every window with every band gives, here with
    every other MiB unmapped."""
    import random

    rng = random.Random(7)
    blocks: list[tuple[int, int | None]] = []
    for _ in range(600):
        size = rng.choice([512, 1024, 4096, 1 << 20, 2 << 20])
        blocks.append((size, None if rng.random() < 0.4 else rng.randrange(1, size + 1)))
    seg = _segment(BASE, blocks)
    bands = bounds.guard_bands(bounds.spare_runs([seg]))
    made = sorted((b["address"] + rng.randrange(0, 256), 0) for b in rng.sample(seg["blocks"], 80))
    made = [(a, a + rng.randrange(8, 1 << 16)) for a, _ in made]
    windows = [(b.start, b.start + bounds.GUARD_BYTES) for b in bands] + [(e, e + bounds.GUARD_BYTES) for _, e in made]
    mapped = [(seg["address"] + k, seg["address"] + k + (1 << 20)) for k in range(0, seg["total_size"], 2 << 20)]
    got = bounds.to_read(bands, bounds._merge(made), [{"address": a, "total_size": b - a} for a, b in mapped],
                         total_bytes=1 << 40)
    free = [(max(lo, a), min(hi, b)) for lo, hi in bounds._minus(bounds._merge(windows), bounds._merge(made))
            for a, b in mapped if min(hi, b) > max(lo, a)]
    every = {((max(lo, b.start) + 3) & ~3, min(hi, b.end) & ~3, b.canary) for lo, hi in free for b in bands}
    assert got == sorted(p for p in every if p[1] > p[0]) and len(got) > 100
