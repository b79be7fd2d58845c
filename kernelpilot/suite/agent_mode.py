"""Agent mode (``--model`` or ``--replay``): one headless agent session per problem, several at once, all of
their evaluations in the suite's GPU pool.

Each problem gets a small git repository of its own inside the run folder (``agent/<problem>/``: the
problem file, committed), since a session works in a worktree of a repository. Per-problem budgets are
``run``'s (``--max-turns``, ``--max-tokens``, ``--budget-usd``, ``--max-wall``); ``--suite-budget-usd``
caps the sum of the sessions' costs: a problem not started when it is reached is stored as
``not_started`` and counts as a failure. A problem's result is its fastest correct, honest candidate
(status ok, lowest candidate time); with none, the last verdict the session got (or ``missing``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

from kernelpilot.agent.factory import build_session, make_client
from kernelpilot.config import load_config
from kernelpilot.suite.discovery import Job, ProblemRef
from kernelpilot.suite.pool import failed_verdict
from kernelpilot.suite.store import Store
from kernelpilot.verdict import Verdict


def make_repo(directory: Path, problem: Path) -> Path:
    """A committed git repository holding a copy of ``problem`` (kept when it exists); returns the copy."""
    target = directory / problem.name
    if (directory / ".git").exists() and target.is_file():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem, target)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=directory, check=True, capture_output=True, text=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "suite@kernelpilot.invalid")
    git("config", "user.name", "kernelpilot suite")
    git("add", "-A")
    git("commit", "-q", "-m", f"problem {problem.name}")
    return target


def best_verdict(verdicts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest correct, honest verdict; else the last one."""
    ok = [v for v in verdicts if v.get("status") == "ok"]

    def median(v: dict[str, Any]) -> float:
        cand = ((v.get("performance") or {}).get("candidate") or {})
        return cand.get("median_ms") or float("inf")

    if ok:
        return min(ok, key=median)
    return verdicts[-1] if verdicts else None


class SuiteBudget:
    def __init__(self, limit_usd: float | None) -> None:
        self.limit = limit_usd
        self.spent: dict[str, float] = {}

    @property
    def total(self) -> float:
        return sum(self.spent.values())

    def exhausted(self) -> bool:
        return self.limit is not None and self.total >= self.limit


async def run_problem(ref: ProblemRef, run_dir: Path, args: argparse.Namespace, evaluator: Any, budget: SuiteBudget,
                      client_factory: Callable[[Any], Any]) -> tuple[Job, Verdict | None, str | None]:
    repo = run_dir / "agent" / ref.key.replace("/", "__")
    problem = await asyncio.to_thread(make_repo, repo, ref.path)
    overrides = {"problem": str(problem), "model": getattr(args, "model", None),
                 "api_base": getattr(args, "api_base", None),
                 "max_turns": getattr(args, "max_turns", None), "max_tokens": getattr(args, "max_tokens", None),
                 "max_cost_usd": getattr(args, "budget_usd", None), "max_wall_s": getattr(args, "max_wall", None)}
    config = load_config(repo, overrides={k: v for k, v in overrides.items() if v is not None})
    ns = argparse.Namespace(problem=problem, config=config, resume=None, replay=getattr(args, "replay", None),
                            model=getattr(args, "model", None), api_base=getattr(args, "api_base", None),
                            auto_approve="never")
    session = build_session(ns, evaluator=evaluator, client=client_factory(ns))
    verdicts: list[dict[str, Any]] = []
    async for event in session.run():
        data = event.to_dict()
        if data["kind"] == "candidate_evaluated":
            verdicts.append(data["verdict"])
        elif data["kind"] == "usage":
            budget.spent[ref.key] = float(data.get("total_cost_usd") or 0.0)
    best = best_verdict(verdicts)
    if best is None:
        return Job(ref, None, 0), None, "missing"
    return Job(ref, Path(best.get("candidate") or repo), 0), Verdict.from_dict(best), None


async def run_agent_suite(problems: list[ProblemRef], store: Store, run_dir: Path, args: argparse.Namespace,
                          evaluator: Any, on_result: Callable[[Job, str, Any], None] | None = None,
                          concurrency: int = 2, client_factory: Callable[[Any], Any] | None = None) -> int:
    """One session per problem without a stored verdict, ``concurrency`` at a time; returns how many were stored."""
    factory = client_factory or (lambda ns: make_client(ns, ns.config))
    budget = SuiteBudget(getattr(args, "suite_budget_usd", None))
    done = store.finished()
    gate = asyncio.Semaphore(max(1, concurrency))
    stored = 0

    async def one(ref: ProblemRef) -> None:
        nonlocal stored
        async with gate:
            if budget.exhausted():
                job, verdict, status = Job(ref, None, 0), None, "not_started"
            else:
                try:
                    job, verdict, status = await run_problem(ref, run_dir, args, evaluator, budget, factory)
                except Exception as exc:  # noqa: BLE001 - one session's failure must not stop the suite
                    job, verdict, status = Job(ref, None, 0), failed_verdict(ref.path, ref.path, "benchmark", exc), None
            if store.add(job, verdict, status=status, gpu=None):
                stored += 1
            if on_result:
                on_result(job, status or (verdict.status if verdict else "missing"), verdict)

    await asyncio.gather(*(one(ref) for ref in problems if Job(ref, None, 0).key not in done))
    return stored
