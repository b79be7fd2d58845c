"""Forked copies of a worker or a builder doing side work on one thread (kernelbench/draws.py: input sets drawn
side by side; build/triton_child.py: an autotuned kernel's configs compiled side by side). The child leaves with
``os._exit``; the parent ends it, done or stuck, with ``end_child``."""

from __future__ import annotations

import os
import signal
import warnings


def fork_quietly() -> int:
    """``os.fork()`` (raises OSError where forking is refused), without Python 3.12's DeprecationWarning about a
    process with threads: the child runs one thing on one thread and exits, never touching the threads' locks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def end_child(pid: int) -> None:
    """The forked child ``pid`` killed (done or stuck: it has nothing more to give) and reaped."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
