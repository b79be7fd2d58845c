"""One long-lived thread for every call the UI makes into the evaluation engine.

The engine's worker process is killed when the *thread* that started it ends (PR_SET_PDEATHSIG, see
evaluation/sandbox/confine.py). Textual thread workers end after each job, so calling the engine from them
would start a cold worker (torch import, CUDA start-up, the torch.compile baseline) for every save.
Calls made through ``EngineThread.call`` all run on one thread that lives as long as the app: the
worker started for the baselines is the one that evaluates the first edit, warm. Calls run one at a
time, in the order they were made.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class EngineThread:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kp-engine")

    def call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """Run ``fn`` on the engine thread and wait for it (call from a thread worker, never the UI)."""
        return self._pool.submit(fn, *args, **kw).result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
