"""The hang watchdog, worker side: a deadline for every call into candidate code.

The worker is single-threaded, so a kernel that never returns blocks it in the next synchronize and it
can say nothing more. Before each call into candidate code (and each batch of timed calls) the harness
therefore tells the caller, in a ``watch`` frame on the response pipe, how long that call may take; the
caller (client.py) waits for the next frame until then and kills the worker past it. After the call
the harness synchronises the device (so a hang shows inside the call's own allowance, not in harness
code) and re-arms with the allowance of the harness's own work.

Allowances come from what is known: ``floor_s + multiple x (eager time of one reference call)`` per
call, with ``first_call_s`` more for the candidate's first call (module load, lazy library handles),
and ``n`` times the per-call part for a batch of ``n`` calls. Harness steps (loading the problem,
compiling the torch.compile baseline, computing fp64 references) are not candidate code: they get
``harness_s``. Outside a worker (unit tests of the harness) every function here is a no-op. Each
announcement is also where a superseded request stops (supersede.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import kernelpilot.evaluation.protocol as protocol
from kernelpilot.evaluation.settings import EvalSettings

SEEN_MARGIN = 2.0  # a call may take this many times the slowest call of the same request seen so far


@dataclass(frozen=True)
class Allowance:
    floor_s: float = 5.0  # any one call (or batch) may take this long, whatever the eager time
    multiple: float = 100.0  # x the eager time of one reference call, per call
    first_call_s: float = 10.0  # extra for the candidate's first call: lazy module loading, handles
    import_s: float = 30.0  # importing the candidate module and constructing ModelNew
    harness_s: float = 300.0  # the harness's own steps between candidate calls
    build_s: float = 300.0  # a compile the candidate starts from inside a call (load_inline in forward)

    @classmethod
    def from_settings(cls, settings: EvalSettings) -> "Allowance":
        return cls(floor_s=float(settings.call_floor_s),
                   multiple=float(settings.call_multiple),
                   first_call_s=float(settings.first_call_s),
                   import_s=float(settings.import_timeout_s),
                   harness_s=float(settings.test_timeout_s),
                   build_s=float(settings.build_timeout_s))

    def calls(self, n: int, reference_s: float, first: bool) -> float:
        return self.floor_s + n * self.multiple * max(reference_s, 0.0) + (self.first_call_s if first else 0.0)


class Watchdog:
    def __init__(self, send: Callable[[dict[str, Any]], None], synchronize: Callable[[], None] | None) -> None:
        self._send = send
        self._synchronize = synchronize
        self.allowance = Allowance()
        self.reference_s = 0.0
        self.candidate_s = 0.0  # the longest one call of this request took, per call
        self._first = True

    def send(self, frame: dict[str, Any]) -> None:
        self._send(frame)

    def begin(self, allowance: Allowance) -> None:
        """A new request: the next candidate call is a first call again."""
        self.allowance, self.reference_s, self.candidate_s, self._first = allowance, 0.0, 0.0, True

    def arm(self, phase: str, call: str, seconds: float) -> None:
        import time

        import kernelpilot.evaluation.supersede as supersede

        supersede.check()  # a newer save cancelled this request: stop here, where the harness is consistent
        self.armed = (phase, call, time.monotonic() + float(seconds))
        self._send({"op": protocol.WATCH, "phase": phase, "call": call, "allow_s": round(float(seconds), 3)})

    def pause(self, what: str, seconds: float) -> tuple[str, str, float]:
        """Work inside a watched call that is not the candidate's (a compile it started, the harness drawing
        inputs) begins: it gets ``seconds``; returns what ``resume`` needs to give the call back the allowance
        it had left."""
        import time

        phase, call, deadline = getattr(self, "armed",
                                        ("import", "harness", time.monotonic() + self.allowance.harness_s))
        left = max(deadline - time.monotonic(), 1.0)
        self.arm(phase, what, seconds)
        return phase, call, left

    def resume(self, paused: tuple[str, str, float]) -> None:
        self.arm(*paused)

    @contextmanager
    def paused(self, what: str, seconds: float) -> Iterator[None]:
        """``pause`` for the block."""
        token = self.pause(what, seconds)
        try:
            yield
        finally:
            self.resume(token)

    @contextmanager
    def compiling(self, what: str) -> Iterator[None]:
        """A compile started from inside candidate code (load_inline in __init__ or forward): it gets the
        build limit, and the call it interrupted keeps the allowance it had left when the compile began
        (the deadline pauses while the compiler runs)."""
        with self.paused(f"compile: {what}", self.allowance.build_s):
            yield

    def step(self, phase: str) -> None:
        """A step of the evaluation begins: importing the candidate is its code; the rest is the harness's."""
        if phase == "import":
            self.arm(phase, "import of the candidate module and ModelNew(...)", self.allowance.import_s)
        else:
            self.arm(phase, "harness", self.allowance.harness_s)

    @contextmanager
    def calls(self, phase: str, call: str, n: int = 1, slowdown: float = 0.0) -> Iterator[None]:
        """``slowdown``: the block runs the calls under an instrument that slows each one down about that
        many times (a Python dispatch mode: every ATen call goes through Python); they get that many times the
        longest call seen so far (without one, ``SEEN_MARGIN`` times), so a slow but finishing candidate is not
        taken for a hang: the eager-based allowance alone (``Allowance.multiple``) would call a correct
        candidate a few hundred times slower than eager a timeout in the timed rounds."""
        import time

        allow = self.allowance.calls(n, self.reference_s, self._first)
        allow = max(allow, self.allowance.floor_s + n * (slowdown or SEEN_MARGIN) * self.candidate_s)
        self._first = False
        self.arm(phase, call, allow)
        start = time.monotonic()
        yield
        if self._synchronize is not None:
            self._synchronize()  # a hung kernel shows here, inside the call's own allowance
        if not slowdown:
            self.candidate_s = max(self.candidate_s, (time.monotonic() - start) / max(n, 1))
        self.arm(phase, "harness", self.allowance.harness_s)


_current: Watchdog | None = None


def install(watchdog: Watchdog | None) -> None:
    global _current
    _current = watchdog


def announce(frame: dict[str, Any]) -> None:
    """Send ``frame`` to the caller on the channel the watch frames take (a benchmark's staged test verdict)."""
    if _current is not None:
        _current.send(frame)


def begin(allowance: Allowance) -> None:
    if _current is not None:
        _current.begin(allowance)


def step(phase: str) -> None:
    if _current is not None:
        _current.step(phase)


@contextmanager
def calls(phase: str, call: str, n: int = 1, slowdown: float = 0.0) -> Iterator[None]:
    """Run the block (``n`` calls into candidate or baseline code) under the watchdog's deadline
    (``slowdown``: see ``Watchdog.calls``)."""
    from kernelpilot.evaluation.worker import memory

    memory.note_call(f"{phase}: {call}")  # what the harness holds as the candidate runs (an OOM verdict says)
    if _current is None:
        yield
        return
    with _current.calls(phase, call, n, slowdown):
        yield


@contextmanager
def compiling(what: str) -> Iterator[None]:
    """Run a compile the candidate started under the build limit, its call's deadline paused."""
    if _current is None:
        yield
        return
    with _current.compiling(what):
        yield


def compile_started(what: str) -> tuple[str, str, float] | None:
    """A compile began where no block can wrap it (torch.compile's callbacks): the build limit for it, the
    interrupted call's deadline paused until ``compile_ended``."""
    return _current.pause(f"compile: {what}", _current.allowance.build_s) if _current is not None else None


def compile_ended(paused: tuple[str, str, float] | None) -> None:
    if _current is not None and paused is not None:
        _current.resume(paused)


@contextmanager
def harness_work(what: str) -> Iterator[None]:
    """Run the harness's own work inside a watched block (KernelBench's harness drawing an input set on the
    host: 10-20 s for level1/19's 1.6 G floats) under the harness allowance, the block's deadline paused."""
    if _current is None:
        yield
        return
    with _current.paused(what, _current.allowance.harness_s):
        yield


def set_reference_seconds(seconds: float) -> None:
    if _current is not None:
        _current.reference_s = seconds
