"""Threads a candidate starts: Python threads seen across its calls (``background-thread``), OS threads the process
gains (``native-thread``, a warning: drivers start them too), and a trace hook that names every Python thread
started while it is active. runtime.py's docstring has the rules.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

from kernelpilot.verdict import Finding

if TYPE_CHECKING:
    from collections.abc import Callable

_HARNESS_THREAD_MODULES = ("torch.", "triton.")


def harness_thread(t: threading.Thread) -> bool:
    """A thread torch or triton started for the harness (Inductor's compile-pool timer, say).

    Judged by the code the thread runs: its target function or its Thread subclass must live in
    torch or triton. The static policy already refuses ``threading`` in candidates, so a candidate
    thread running torch's own code is not a practical way around this.
    """
    target = getattr(t, "_target", None) or getattr(t, "function", None)
    modules = [getattr(target, "__module__", None) or "", type(t).__module__]
    return any(m.startswith(_HARNESS_THREAD_MODULES) for m in modules)


@dataclass
class ThreadSnapshot:
    python: frozenset[int]
    native: int

    @classmethod
    def take(cls) -> "ThreadSnapshot":
        try:
            native = len(os.listdir("/proc/self/task"))
        except OSError:
            native = 0
        return cls(frozenset(t.ident or 0 for t in threading.enumerate() if not harness_thread(t)), native)


def thread_findings(before: ThreadSnapshot, after: ThreadSnapshot, native: bool = True) -> list[Finding]:
    findings = []
    new = after.python - before.python
    if new:
        names = [t.name for t in threading.enumerate() if t.ident in new]
        findings.append(Finding(rule="background-thread", evidence=", ".join(names),
                                message=f"the candidate started {len(new)} Python thread(s) ({', '.join(names)}); "
                                        "work must finish inside forward."))
    elif native and after.native > before.native:
        findings.append(Finding(rule="native-thread", severity="warn", evidence=f"{before.native} -> {after.native}",
                                message=f"the process gained {after.native - before.native} OS thread(s) while "
                                        "the candidate ran (drivers may do this too)."))
    return findings


class ThreadWatch:
    """Names of Python threads started while active (threading.settrace fires in each new thread)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._old: Callable[..., object] | None = None

    def _hook(self, frame: FrameType, event: str, arg: object) -> None:
        current = threading.current_thread()
        if not harness_thread(current):
            self.started.append(current.name)
        sys.settrace(None)  # one record per thread, no tracing cost after that

    def __enter__(self) -> "ThreadWatch":
        self._old = threading.gettrace() if hasattr(threading, "gettrace") else None
        threading.settrace(self._hook)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        threading.settrace(self._old)  # type: ignore[arg-type]

    def findings(self) -> list[Finding]:
        if not self.started:
            return []
        names = ", ".join(sorted(set(self.started)))
        return [Finding(rule="background-thread", evidence=names,
                        message=f"the candidate started {len(self.started)} Python thread(s) ({names}); "
                                "work must be done inside forward, on the caller's stream.")]
