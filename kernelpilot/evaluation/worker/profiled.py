"""A worker request under cProfile, when ``KERNELPILOT_WORKER_PROFILE`` names a folder the worker may write
(benchmarks/verify_profile.py: where a verdict's seconds go inside the worker). Off by default."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "KERNELPILOT_WORKER_PROFILE"


def profiled(answer: Callable[[Any, dict[str, Any]], dict[str, Any]], worker: Any,
             msg: dict[str, Any]) -> dict[str, Any]:
    """``answer(worker, msg)``; profiled into ``request-<id>-<mode>.prof`` in the folder ``ENV`` names, if any."""
    folder = os.environ.get(ENV, "")
    if not folder:
        return answer(worker, msg)
    import cProfile

    profile = cProfile.Profile()
    try:
        return profile.runcall(answer, worker, msg)
    finally:
        profile.dump_stats(str(Path(folder) / f"request-{msg.get('request_id', 0)}-{msg.get('mode', '')}.prof"))
