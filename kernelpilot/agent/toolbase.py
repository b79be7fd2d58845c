"""What the agent's tools are made of: the context they act on, their result, their failure and their
schema (tools.py defines the file and skill tools and the registry, evaltools.py the evaluation tools)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.agent.candidates import CandidateBook
from kernelpilot.agent.events import Event


@dataclass
class ToolResult:
    text: str
    ok: bool = True
    events: list[Event] = field(default_factory=list)  # e.g. CandidateEvaluated, yielded by the loop
    proposal: str = ""  # candidate id the model proposes; the loop asks the engineer
    summary: str = ""


@dataclass
class ToolContext:
    """What the tools act on."""

    problem: Any  # kernelpilot.problem.Problem
    workspace: Any  # kernelpilot.workspace.Workspace
    evaluator: Any  # kernelpilot.evaluation.Evaluator (or an object with the same interface)
    config: Any = None  # kernelpilot.config.ProjectConfig
    candidate_rel: Path = Path("kernels/candidate")  # relative to the worktree root
    book: CandidateBook = field(default_factory=CandidateBook)
    skills_dir: Path | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return Path(self.workspace.path)

    @property
    def candidate_dir(self) -> Path:
        return self.root / self.candidate_rel


Handler = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolResult]]


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler

    def schema(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class ToolFailure(Exception):
    """Raised inside a handler to return ``ok=False`` text to the model."""
