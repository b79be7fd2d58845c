"""How a worker fails, as the caller sees it: a request past its time, a worker that died (and the signal or exit
code that ended it)."""

from __future__ import annotations

import signal


class WorkerFailure(Exception):
    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail



class WorkerTimeout(WorkerFailure):
    """The request ran past its limit; the process group was killed.

    ``phase`` and ``call`` name what the worker was doing (from its last watch frame), ``allow_s`` the
    deadline it had for that, ``phases`` the seconds each step had taken when the worker was killed.
    """

    def __init__(self, message: str, log_tail: str = "", *, phase: str = "", call: str = "", allow_s: float = 0.0,
                 phases: dict[str, float] | None = None) -> None:
        super().__init__(message, log_tail)
        self.phase, self.call, self.allow_s = phase, call, allow_s
        self.phases = dict(phases or {})



class WorkerDied(WorkerFailure):
    """The worker exited (signal, abort, CUDA error) before answering; ``phase`` and ``call`` say what it
    was doing (its last watch frame), when it said."""

    phase: str = ""
    call: str = ""



def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the worker stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the worker was killed by {name}"
    return f"the worker exited with status {returncode}"
