"""Leaving a build process at once, once its result is printed.

A build process that imported torch (and Triton) spends about half a second in the interpreter's teardown after
its last line (0.55 s of 2.35 s on our CPU machine), and the build step waits for that exit: every build through
torch's builder, the single-file builder and the standby builder paid it. :func:`leave` flushes and ends the
process with ``os._exit``, unless it has child processes alive: those may hold the build's output pipe open until
an ``atexit`` hook ends them (a pool of compile workers a candidate started), so the process then exits as usual.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def child_processes() -> list[int] | None:
    """The pids of this process's children, from /proc (None where it cannot say)."""
    pid = os.getpid()
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                found += [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        return None
    return found


def leave(code: int | None) -> NoReturn:
    """Exit with ``code`` (None: 0) now, without the interpreter's teardown where nothing depends on it."""
    status = 0 if code is None else int(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if child_processes() != []:
        sys.exit(status)
    os._exit(status)
