"""A newer save supersedes the evaluation in flight: how the caller cancels it, and how the worker stops.

The pairing loop evaluates every save; when the engineer saves again before the verdict, the old
evaluation is worth nothing. ``Evaluator.cancel()`` (any thread) ends it as ``superseded``, never as a
failure:

- a build in flight: its process group is killed (``CancelToken.attach`` gets the build's process);
- a worker request: the caller writes the request's id on a third pipe (``CancelPipe``, the worker's
  ``--cancel-fd``). The worker reads that pipe at each watchdog announcement (before every call into
  candidate code and every harness step: watchdog.py) and raises :class:`Superseded` there, at a point
  where the harness's state is consistent, so the worker answers ``superseded`` and stays warm. A worker
  that does not reach an announcement within the grace period (a call that spins, a long native call)
  is killed and replaced; that is not counted as a crash.

Ids only grow within one worker process: a cancel names every request up to and including its id, so a
cancel that arrives late can never stop a newer request. This module imports nothing heavy.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from typing import Any

SUPERSEDED = "superseded"


class Superseded(BaseException):
    """Raised in the worker at a watchdog announcement when a newer save cancelled this request. A
    BaseException, so that no harness ``except Exception`` (a failed torch.compile, a trial's error)
    takes it for a failure of the candidate or the baseline."""


class CancelPipe:
    """The worker's end: ``begin(id)`` when a request starts, ``check()`` at each announcement."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.upto = 0
        self.current: int | None = None
        self._buffer = b""

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in lines:
                if line.strip().isdigit():
                    self.upto = max(self.upto, int(line))

    def begin(self, request_id: int | None) -> None:
        self._drain()
        self.current = request_id

    def end(self) -> None:
        self.current = None

    def cancelled(self) -> bool:
        if self.current is None:
            return False
        self._drain()
        return self.current <= self.upto

    def check(self) -> None:
        if self.cancelled():
            self.current = None  # raised once: the harness's own cleanup announces nothing more to stop
            raise Superseded("a newer save superseded this evaluation")


_pipe: CancelPipe | None = None


def install(pipe: CancelPipe | None) -> None:
    global _pipe
    _pipe = pipe


def current() -> CancelPipe | None:
    return _pipe


def check() -> None:
    """At a watchdog announcement: stop here if this request was cancelled (no-op outside a worker)."""
    if _pipe is not None:
        _pipe.check()


def cancellable(run: Callable[[dict[str, Any]], dict[str, Any]], msg: dict[str, Any]) -> dict[str, Any]:
    """Worker side: ``run(msg)``, a request a newer save may cancel (an evaluation, a pairing session's baselines),
    with its id begun on the cancel pipe."""
    pipe = current()
    if pipe is not None:
        pipe.begin(msg.get("request_id"))
    try:
        return run(msg)
    finally:
        if pipe is not None:
            pipe.end()


class CancelToken:
    """The caller's handle on one evaluation: ``cancel()`` from any thread; the evaluation's own thread
    registers what is running (a build process, a worker request) and asks ``cancelled``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._procs: list[subprocess.Popen[Any]] = []
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def attach(self, proc: subprocess.Popen[Any]) -> None:
        """A build process (its own session) that ``cancel`` kills; killed at once if already cancelled."""
        with self._lock:
            self._procs.append(proc)
            late = self.cancelled
        if late:
            _kill_session(proc)

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run ``hook`` on cancel (at once if already cancelled); returns the function that removes it."""
        with self._lock:
            self._hooks.append(hook)
            late = self.cancelled
        if late:
            hook()

        def remove() -> None:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return remove

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled.is_set():
                return
            self._cancelled.set()
            procs, hooks = list(self._procs), list(self._hooks)
        for proc in procs:
            _kill_session(proc)
        for hook in hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 - a worker that went away meanwhile: nothing left to stop
                pass


def _kill_session(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is not None:
        return
    from kernelpilot.evaluation.build.processes import kill_session

    kill_session(proc.pid)
