"""A side stream joined to the caller's stream both ways is honest; one joined one way, or not at all, is not.

Traces are written as torch.profiler exports them (chrome trace, kineto's ``cuda_sync`` records asked for with
``enable_cuda_sync_events``): the caller's markers under their annotations, kernels with their launch's
correlation id, stream waits naming the stream and correlation of the awaited ``cudaEventRecord``.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.evaluation.audit import runtime as ra
from kernelpilot.evaluation.audit.kernel_trace import END_MARK, START_MARK, parse_trace
from kernelpilot.evaluation.audit.stream_joins import joined_streams

HOME, SIDE, THIRD = 7, 13, 14
END = 90  # the end marker's launch correlation
KERNEL = "void gelu_kernel(float const*, float*, long long)"


def _trace(kernels: list[tuple[str, int, int, float, float]], syncs: list[dict[str, Any]],
           end_at: float = 500.0, annotate: bool = True, spin: bool = False) -> dict[str, Any]:
    """kernels: (name, stream, launch correlation, GPU start, GPU duration); the markers are added on HOME:
    the start one (correlation 1) ends at GPU time 102, the end one (correlation END) starts at ``end_at``;
    ``spin``: the caller's stream spins (correlation 0, GPU 0-99) under the start annotation first."""
    events: list[dict[str, Any]] = []
    if spin:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0, "dur": 1, "tid": 1,
                       "args": {"correlation": 0}})
        events.append({"ph": "X", "cat": "kernel", "name": "spin_kernel(long)", "ts": 0.0, "dur": 99,
                       "args": {"stream": HOME, "correlation": 0}})
    marks = [(START_MARK, 1, 0.0, 100.0, "void at::native::vectorized_elementwise_kernel<4, FillFunctor>"),
             (END_MARK, END, 900.0, end_at, "void at::native::vectorized_elementwise_kernel<4, FillFunctor>")]
    for mark, corr, cpu, gpu, name in marks:
        if annotate:
            events.append({"ph": "X", "cat": "user_annotation", "name": mark, "ts": cpu, "dur": 8, "tid": 1})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": cpu + 2, "dur": 3,
                       "tid": 1, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": gpu, "dur": 2,
                       "args": {"stream": HOME, "correlation": corr}})
    for name, stream, corr, start, dur in kernels:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.0 * corr, "dur": 3,
                       "tid": 1, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": dur,
                       "args": {"stream": stream, "correlation": corr}})
    for y in syncs:
        events.append({"ph": "X", "cat": "cuda_sync", "name": y["kind"], "ts": 10.0 * y["corr"], "dur": 1,
                       "args": {"cuda_sync_kind": y["kind"], "correlation": y["corr"], "stream": y.get("stream", -1),
                                "wait_on_stream": y.get("on", -1),
                                "wait_on_cuda_event_record_corr_id": y.get("rec", -1)}})
    return {"traceEvents": events}


def _wait(waiter: int, on: int, corr: int, rec: int) -> dict[str, Any]:
    return {"kind": "Stream Wait Event", "corr": corr, "stream": waiter, "on": on, "rec": rec}


ENTRY = _wait(SIDE, HOME, corr=11, rec=10)  # s.wait_stream(current): record on HOME (10), wait on SIDE (11)
EXIT = _wait(HOME, SIDE, corr=31, rec=30)  # current.wait_stream(s) after the launch (20)
SIDE_KERNEL = (KERNEL, SIDE, 20, 150.0, 200.0)  # GPU 150..350, before the end marker at 500


def _side(trace: dict[str, Any], syncs_recorded: bool = True) -> list[str]:
    parsed = parse_trace(trace, syncs_recorded=syncs_recorded)
    return [f.rule for f in ra.kernel_findings(parsed, ["gelu_kernel"], []) if f.rule == "side-stream"]


def test_markers_are_found_by_their_annotations_and_kept_out_of_the_kernels() -> None:
    trace = parse_trace(_trace([SIDE_KERNEL], [ENTRY, EXIT]), syncs_recorded=True)
    assert trace.home_stream == HOME and trace.kernels == [(KERNEL, SIDE)]
    assert trace.start_mark == (102.0, 1) and trace.end_mark == (500.0, END)
    assert trace.spans == [(150.0, 350.0)] and trace.correlations == [20]
    assert [y.kind for y in trace.syncs] == ["Stream Wait Event", "Stream Wait Event"]
    # an older trace without annotations: the first kernel is the start marker, the end one is just a kernel
    old = parse_trace(_trace([SIDE_KERNEL], [], annotate=False))
    assert old.home_stream == HOME and old.end_mark is None and len(old.kernels) == 2


def test_a_side_stream_joined_both_ways_is_no_finding() -> None:
    assert joined_streams(parse_trace(_trace([SIDE_KERNEL], [ENTRY, EXIT]), syncs_recorded=True)) == {SIDE}
    assert _side(_trace([SIDE_KERNEL], [ENTRY, EXIT])) == []


def test_a_side_stream_joined_one_way_is_a_finding() -> None:
    """The corpus's l1_88_gelu_side_stream: no wait for the caller's stream, the host waits for the side stream
    (it may read inputs not yet written and start before the timer's start event); and the reverse."""
    host_waits = {"kind": "Stream Sync", "corr": 31, "stream": SIDE}
    assert _side(_trace([SIDE_KERNEL], [host_waits])) == ["side-stream"]
    assert _side(_trace([SIDE_KERNEL], [ENTRY, host_waits])) == []  # with the entry wait it is joined
    assert _side(_trace([SIDE_KERNEL], [ENTRY])) == ["side-stream"]  # never awaited before forward returns
    assert _side(_trace([SIDE_KERNEL], [EXIT])) == ["side-stream"]


def test_waits_that_do_not_cover_the_work_join_nothing() -> None:
    # the awaited event was recorded on the side stream before the kernel's launch (corr 20): not after it
    early = _wait(HOME, SIDE, corr=31, rec=15)
    assert _side(_trace([SIDE_KERNEL], [ENTRY, early])) == ["side-stream"]
    # the entry wait's event was recorded on the caller's stream before the start marker: older work only
    stale = _wait(SIDE, HOME, corr=11, rec=0)
    assert _side(_trace([SIDE_KERNEL], [stale, EXIT])) == ["side-stream"]
    # the entry wait came after the launch it should order
    late = _wait(SIDE, HOME, corr=25, rec=24)
    assert _side(_trace([SIDE_KERNEL], [late, EXIT])) == ["side-stream"]
    # the harness's own synchronize after the end marker is not the candidate's join
    ours = {"kind": "Context Sync", "corr": END + 5}
    assert _side(_trace([SIDE_KERNEL], [ENTRY, ours])) == ["side-stream"]
    # another stream waits for the side stream, but nothing joins that one to the caller's
    sideways = _wait(THIRD, SIDE, corr=31, rec=30)
    assert _side(_trace([SIDE_KERNEL, ("k2", THIRD, 40, 360.0, 10.0)], [ENTRY, sideways])) == ["side-stream"]


def test_the_gpu_clock_must_agree_with_the_joins() -> None:
    """Waits recorded, yet the side kernel ran on past the end marker: the timer did not see it."""
    overrun = (KERNEL, SIDE, 20, 150.0, 600.0)
    assert _side(_trace([overrun], [ENTRY, EXIT])) == ["side-stream"]
    assert _side(_trace([SIDE_KERNEL], [ENTRY, EXIT], end_at=300.0)) == ["side-stream"]


def test_without_synchronization_records_nothing_is_joined() -> None:
    assert _side(_trace([SIDE_KERNEL], [ENTRY, EXIT]), syncs_recorded=False) == ["side-stream"]


def test_joins_through_a_chain_of_streams_and_host_waits() -> None:
    # SIDE waits for the caller; THIRD waits for SIDE; the caller waits for THIRD, which had waited for SIDE's work
    chain = [ENTRY, _wait(THIRD, SIDE, corr=31, rec=30), _wait(HOME, THIRD, corr=51, rec=50)]
    kernels = [SIDE_KERNEL, ("void other_kernel(float*)", THIRD, 40, 360.0, 20.0)]
    assert joined_streams(parse_trace(_trace(kernels, chain), syncs_recorded=True)) == {SIDE, THIRD}
    # the caller's wait for THIRD was recorded before THIRD waited for SIDE: SIDE is not covered
    broken = [ENTRY, _wait(THIRD, SIDE, corr=31, rec=30), _wait(HOME, THIRD, corr=29, rec=28)]
    assert joined_streams(parse_trace(_trace(kernels, broken), syncs_recorded=True)) == set()
    # the host waited for the whole device after the launch, and for the caller's stream before it
    host = [{"kind": "Stream Sync", "corr": 12, "stream": HOME}, {"kind": "Context Sync", "corr": 31}]
    assert _side(_trace([SIDE_KERNEL], host)) == []
    # ... or for an event recorded on the side stream after its launch (cudaEventSynchronize)
    event = [ENTRY, {"kind": "Event Sync", "corr": 32, "on": SIDE, "rec": 30}]
    assert _side(_trace([SIDE_KERNEL], event)) == []


def test_waits_on_events_of_unknown_stream_count_when_the_clock_agrees() -> None:
    """A kineto that collects no CUDA-event records leaves the awaited event's stream unknown (-1). The waits still
    count from their place in launch order, with the caller's stream spinning before the start marker: a side
    stream that did not really wait starts before the marker ends, and fails on the clock."""
    entry = {"kind": "Stream Wait Event", "corr": 11, "stream": SIDE}
    exit_ = {"kind": "Stream Wait Event", "corr": 31, "stream": HOME}
    spun = parse_trace(_trace([SIDE_KERNEL], [entry, exit_], spin=True), syncs_recorded=True)
    assert spun.start_spin and spun.start_mark == (102.0, 1) and spun.kernels == [(KERNEL, SIDE)]
    assert joined_streams(spun) == {SIDE}
    # without the spin the clock cannot tell a real entry wait from a wait for nothing: not joined
    assert joined_streams(parse_trace(_trace([SIDE_KERNEL], [entry, exit_]), syncs_recorded=True)) == set()
    # a wait that ordered nothing: the side kernel started while the caller's stream still spun
    early = (KERNEL, SIDE, 20, 40.0, 30.0)
    assert joined_streams(parse_trace(_trace([early], [entry, exit_], spin=True), syncs_recorded=True)) == set()
    # the caller's wait came before the side launch (corr 20): it awaited none of it
    before = {"kind": "Stream Wait Event", "corr": 15, "stream": HOME}
    assert joined_streams(parse_trace(_trace([SIDE_KERNEL], [entry, before], spin=True), syncs_recorded=True)) == set()
    # no entry wait at all (the corpus's host-joined side stream): not joined, whatever the clock says
    host = {"kind": "Stream Sync", "corr": 31, "stream": SIDE}
    assert joined_streams(parse_trace(_trace([SIDE_KERNEL], [host], spin=True), syncs_recorded=True)) == set()
    # an exit wait whose side kernel still ran when the end marker started
    late = (KERNEL, SIDE, 20, 150.0, 400.0)
    assert joined_streams(parse_trace(_trace([late], [entry, exit_], spin=True), syncs_recorded=True)) == set()
