"""A replayed session on a machine without a GPU: every evaluation it asks for is a build.

``kernelpilot run --replay`` and the UI's ``--replay`` need no GPU. Without one, the agent's ``test`` and
``benchmark`` calls (and the engineer's saves) get build-only verdicts (mode ``build``: diagnostics,
registers, spills; shown as ``built``), honestly labelled, instead of a worker that cannot start.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kernelpilot.machine import gpu_count

NOTE = "build only: no GPU here, so it was neither run nor timed"


class BuildOnlyEvaluator:
    """The engine's Evaluator with every evaluation asked for in mode ``build``; the rest passes through."""

    def __init__(self, evaluator: Any) -> None:
        self.inner = evaluator

    async def evaluate_async(self, problem: Any, candidate: Any, mode: str = "benchmark", **kw: Any) -> Any:
        if hasattr(self.inner, "evaluate_async"):
            return _said(await self.inner.evaluate_async(problem, candidate, mode="build", **kw), mode)
        return _said(await asyncio.to_thread(self.inner.evaluate, problem, candidate, mode="build", **kw), mode)

    def evaluate(self, problem: Any, candidate: Any, mode: str = "benchmark", **kw: Any) -> Any:
        return _said(self.inner.evaluate(problem, candidate, mode="build", **kw), mode)

    def __getattr__(self, name: str) -> Any:  # close, cancel, baselines, settings, ...
        return getattr(self.inner, name)


def _said(verdict: Any, asked: str) -> Any:
    """A build that passed says it was only a build (the model and the log read the summary)."""
    if asked != "build" and getattr(verdict, "status", "") == "ok" and NOTE not in (verdict.summary or ""):
        verdict.summary = f"{verdict.summary or 'built'}; {NOTE}"
    return verdict


def for_replay(evaluator: Any, replay: bool) -> Any:
    """``evaluator``, build-only when this is a replay on a machine where no GPU is visible."""
    if not replay:
        return evaluator
    return evaluator if gpu_count() > 0 else BuildOnlyEvaluator(evaluator)
