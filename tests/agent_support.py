"""Shared pieces for the agent tests: a real git project with a tiny problem, and the one test double
we accept: an evaluator with the engine's interface that returns verdicts from fixture JSON (the GPU
cannot be reached from CI)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.verdict import Verdict

DATA = Path(__file__).parent / "data"
VERDICTS = DATA / "verdicts"
CANDIDATE = DATA / "candidates" / "vector_scale"

PROBLEM = '''\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, alpha: float = 2.0) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.alpha * x


def get_inputs():
    return [torch.randn(1 << 16)]


def get_init_inputs():
    return [2.0]
'''


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_project(root: Path) -> Path:
    """A committed git repository holding problem.py; returns the problem path."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "engineer@example.com")
    git(root, "config", "user.name", "Engineer")
    (root / "vector_scale.py").write_text(PROBLEM)
    (root / "README.md").write_text("a project\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root / "vector_scale.py"


def candidate_files() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(CANDIDATE.iterdir()) if p.is_file()}


class FixtureEvaluator:
    """Evaluator interface (``evaluate``/``evaluate_async``) answering from fixture verdict JSON.

    ``benchmarks`` lists the fixture files returned by successive benchmark calls (the last one
    repeats); build and test answers derive from the same verdict, cut to what those modes report.
    The candidate directory must exist and hold the candidate files, like the real engine needs.
    """

    def __init__(self, benchmarks: list[str], *, build: str | None = None, delay_s: float = 0.0) -> None:
        self.benchmarks = list(benchmarks)
        self.build_fixture = build
        self.delay_s = delay_s
        self.calls: list[tuple[str, Path]] = []
        self.started = asyncio.Event()

    def _load(self, name: str) -> Verdict:
        return Verdict.from_dict(json.loads((VERDICTS / name).read_text()))

    async def evaluate_async(self, problem: Any, candidate: Any, mode: str = "benchmark") -> Verdict:
        path = Path(candidate)
        self.calls.append((mode, path))
        self.started.set()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not (path / "model_new.py").is_file():
            return Verdict(status="build_error", mode=mode, summary="no model_new.py in the candidate directory")
        if mode == "build":
            v = self._load(self.build_fixture or self.benchmarks[0])
            return Verdict(status="ok" if v.build and v.build.ok else "build_error", mode="build",
                           summary=v.summary, build=v.build)
        name = self.benchmarks[0] if len(self.benchmarks) == 1 or mode != "benchmark" else self.benchmarks.pop(0)
        v = self._load(name)
        v.mode = mode
        if mode == "test":
            v.performance = None
            v.speed_of_light = None
        return v

    def evaluate(self, problem: Any, candidate: Any, mode: str = "benchmark") -> Verdict:
        return asyncio.run(self.evaluate_async(problem, candidate, mode))


@dataclass
class Project:
    root: Path
    problem: Any
    config: Any
    workspace: Any


def open_project(tmp_path: Path, session_id: str = "s1") -> Project:
    from kernelpilot.config import load_config
    from kernelpilot.problem import load_problem
    from kernelpilot.workspace import Workspace

    problem_path = make_project(tmp_path / "proj")
    root = problem_path.parent
    config = load_config(root, overrides={"problem": str(problem_path)}, env={})
    problem = load_problem(problem_path)
    ws = Workspace.open(root, session_id, candidate_dir=config.candidate_dir, problem=problem_path)
    return Project(root=root, problem=problem, config=config, workspace=ws)
