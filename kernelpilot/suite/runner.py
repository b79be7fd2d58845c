"""Drive a suite of existing solutions through a pool: skip what the store has, submit the rest, store each
verdict the moment it arrives, tell the progress display."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Callable

from kernelpilot.suite.discovery import Job
from kernelpilot.suite.pool import SlotResult
from kernelpilot.suite.store import Store


def pending_jobs(store: Store, jobs: list[Job]) -> list[Job]:
    done = store.finished()
    return [j for j in jobs if j.key not in done]


def run_jobs(store: Store, pool: Any, jobs: list[Job], mode: str,
             on_result: Callable[[Job, str, Any], None] | None = None,
             settings_for: Callable[[Job], Any] | None = None) -> int:
    """Evaluate every job without a stored verdict; returns how many were stored now.

    ``settings_for(job)`` gives a job's EvalSettings (default: the pool's). Jobs without a candidate are stored at
    once as ``missing``. An interrupt (Ctrl-C) propagates after the verdicts already finished are stored; the rest
    stay pending for ``--resume``.
    """
    stored = 0
    futures: dict[Future[SlotResult], Job] = {}
    for job in pending_jobs(store, jobs):
        if job.candidate is None:
            if store.add(job, None, status="missing"):
                stored += 1
            if on_result:
                on_result(job, "missing", None)
            continue
        settings = settings_for(job) if settings_for else None
        futures[pool.submit(job.problem.path, job.candidate, mode, settings)] = job
    remaining = set(futures)
    while remaining:
        finished, remaining = wait(remaining, return_when=FIRST_COMPLETED, timeout=1.0)
        for future in finished:
            job = futures[future]
            result = future.result()
            if store.add(job, result.verdict, gpu=result.gpu):
                stored += 1
            if on_result:
                on_result(job, result.verdict.status, result.verdict)
    return stored
