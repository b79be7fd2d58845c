"""Shared pieces for the TUI tests: deterministic verdicts, diffs and Event scripts, and a waiter."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpilot.agent import events as ev
from kernelpilot.tui.gpu import FixedGpuSource, GpuReading
from kernelpilot.verdict import (Correctness, Finding, Performance, SpeedOfLight, Timing, TrialResult,
                                 Verdict)

DATA_DIR = Path(__file__).parents[1] / "data"
GPU = FixedGpuSource(GpuReading("H200", 37, 1024, 143771, 1980, 45))

DIFF = """\
diff --git a/kernels/softmax/kernel.cu b/kernels/softmax/kernel.cu
--- a/kernels/softmax/kernel.cu
+++ b/kernels/softmax/kernel.cu
@@ -1,6 +1,7 @@
 #include <cuda_runtime.h>
 /* one block per row */
-__global__ void softmax(const float* x, float* y, int n) {
-  float m = x[0];
+__global__ void softmax(const float* __restrict__ x, float* __restrict__ y, int n) {
+  float m = -INFINITY;
+  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
   // reduce
 }
 int unused;
"""


def verdict(speedup: float, status: str = "ok", flags: list[str] | None = None) -> dict[str, Any]:
    ok = status == "ok"
    trials = [TrialResult(seed=i, distribution=d, order="candidate_first", passed=ok,
                          normalized_error=1e-7 if ok else 3e-2, mismatched=0 if ok else 812, total=8192)
              for i, d in enumerate(("normal", "uniform", "scaled"))]
    eager = Timing(0.100, 0.098, 0.103, 0.097, 200)
    return Verdict(
        status=status,  # type: ignore[arg-type]
        summary=f"correct, {speedup:.2f}x vs eager" if ok else "wrong results on 3 of 3 trials",
        correctness=Correctness(passed=ok, atol=1e-4, rtol=1e-4, trials=trials, deterministic=True,
                                inputs_unmodified=True, fully_written=True, discriminates=True),
        findings=[] if ok else [Finding(rule="side-stream", message="launches work on a side stream",
                                        severity="warn", file="kernel.cu", line=12)],
        performance=Performance(candidate=Timing(0.1 / speedup, 0.098 / speedup, 0.103 / speedup,
                                                 0.097 / speedup, 200),
                                eager=eager, compiled=Timing(0.080, 0.079, 0.082, 0.078, 200),
                                speedup_vs_eager=speedup, speedup_vs_compile=speedup * 0.8, noise_pct=1.5,
                                tier="faster_than_eager" if ok else "incorrect") if ok else None,
        speed_of_light=SpeedOfLight(bound="memory", pct_of_ceiling=41.0, achieved_tbps=1.97,
                                    ceiling_tbps=4.8, floor_ms=0.029) if ok else None,
        flags=list(flags or []),
    ).to_dict()


def script() -> list[ev.Event]:
    """A short agent session: streamed text, a tool call, two candidates, a proposal."""
    at = 1_700_000_000.0
    return [
        ev.SessionStarted(session_id="s-test", problem="softmax", model="replay: demo.jsonl", replay=True, at=at),
        ev.TextDelta(text="Reading the **problem**: a row ", at=at),
        ev.TextDelta(text="softmax over 4096 columns.\n\n- one block per row", at=at),
        ev.AssistantMessage(text="Reading the **problem**: a row softmax over 4096 columns.\n\n- one block per row",
                            turn=1, at=at),
        ev.Usage(prompt_tokens=1500, completion_tokens=300, cost_usd=0.012, total_tokens=1800,
                 total_cost_usd=0.012, at=at),
        ev.ToolCallStarted(call_id="t1", name="write_file",
                           arguments={"path": "kernels/softmax/kernel.cu", "content": "..."}, at=at),
        ev.ToolCallFinished(call_id="t1", name="write_file",
                            result="wrote kernels/softmax/kernel.cu (42 lines)\nsecond line of output", seconds=0.1,
                            at=at),
        ev.CandidateEvaluated(candidate_id="c1", verdict=verdict(0.9, "incorrect"), diff=DIFF, at=at),
        ev.CandidateEvaluated(candidate_id="c2", verdict=verdict(1.62, flags=["timing spread above 5%"]),
                              diff=DIFF, at=at),
        ev.ProposalReady(candidate_id="c2", summary="one block per row, fused max and sum",
                         verdict=verdict(1.62, flags=["timing spread above 5%"]), diff=DIFF, at=at),
    ]


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await pilot.pause(0.05)
    await pilot.pause()


def conversation_text(app: Any) -> str:
    """The text of every entry in the conversation pane (notes, Markdown sources, tool titles)."""
    from textual.widgets import Collapsible, Markdown, Static

    parts: list[str] = []
    for widget in app.conversation.children:
        if isinstance(widget, Markdown):
            parts.append(widget.source)
        elif isinstance(widget, Collapsible):
            parts.append(str(widget.title))
        elif isinstance(widget, Static):
            parts.append(str(widget.content))
    return "\n".join(parts)


def table_rows(app: Any) -> dict[str, list[str]]:
    table = app.panel.table
    return {str(key.value): [str(c) for c in table.get_row(key)] for key in table.rows}


async def settle(seconds: float = 0.1) -> None:
    await asyncio.sleep(seconds)


BASELINES = DATA_DIR / "baselines" / "softmax_h200.json"
SOFTMAX = Path(__file__).parents[2] / "examples" / "softmax" / "problem.py"


class FixtureBaselines:
    """The Evaluator's ``baselines(problem)`` answering from fixture JSON: the accepted test double (CI
    has no GPU). With ``release`` it blocks until that event is set, like a worker still measuring; a call made
    ``deferrable`` gives way to ``defer_baselines()`` as the Evaluator's does (BaselinesDeferred)."""

    def __init__(self, release: threading.Event | None = None, fail: str = "") -> None:
        self.release = release
        self.fail = fail
        self.calls: list[Path] = []
        self.threads: list[str] = []
        self.deferrable: list[bool] = []
        self._in_flight = False
        self._cancelled = threading.Event()

    def defer_baselines(self) -> bool:
        """As Evaluator.defer_baselines: stops a deferrable call in flight; False when none is."""
        if not self._in_flight:
            return False
        self._cancelled.set()
        return True

    def baselines(self, problem: Path, *, readable: list[Path] | None = None, deferrable: bool = False) -> Any:
        from kernelpilot.errors import BaselinesDeferred, KernelpilotError
        from kernelpilot.evaluation.baselines.values import Baselines

        self.calls.append(Path(problem))
        self.readable = list(readable or [])
        self.threads.append(threading.current_thread().name)
        self.deferrable.append(deferrable)
        self._in_flight, deadline = deferrable, time.monotonic() + 30
        try:
            while self.release is not None and not self.release.wait(0.01) and time.monotonic() < deadline:
                if self._cancelled.is_set():
                    raise BaselinesDeferred("the baselines gave way to a save")
        finally:
            self._in_flight = False
            self._cancelled.clear()
        if self.fail:
            raise KernelpilotError(f"the baselines were not measured: {self.fail}")
        return Baselines.from_dict(json.loads(BASELINES.read_text()))
