"""What the app starts with: the session and the facts the screen shows about it.

``Startup`` is built off the UI thread by a factory (``build_startup`` for the real command line,
a lambda in tests). Heavy modules (the agent loop, litellm, the evaluator, torch) are imported
inside the factory, never at import time of this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.tui.pairing import EditEvaluator
from kernelpilot.tui.session import SessionLike

MODEL_HELP = '--model anthropic/claude-sonnet-4-5 or model = "..." in kernelpilot.toml'


@dataclass
class Startup:
    session: SessionLike
    model: str = ""  # "" means manual mode: no agent, the engineer's edits are evaluated
    replay: bool = False
    project: str = ""
    session_id: str = ""
    worktree: Path | None = None
    watch_dir: Path | None = None  # the candidate directory in the worktree, watched for edits
    edit_evaluator: EditEvaluator | None = None
    workspace: Any = None
    budgets: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # the problem card (shown when ``problem`` is set): the problem (kernelpilot.problem.Problem), whether a
    # GPU is visible, and what measures the baselines (``baselines(problem_path)``, e.g. the Evaluator)
    problem: Any = None
    gpu: bool = True
    evaluator: Any = None
    engine: Any = None  # EngineThread: calls into the engine run there (None: in the calling thread)

    @property
    def manual(self) -> bool:
        return not self.model

    def call_engine(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run an engine call on the engine thread when there is one (blocking: from a thread worker)."""
        return self.engine.call(fn, *args, **kw) if self.engine is not None else fn(*args, **kw)

    def banner(self) -> str:
        where = "each save is evaluated" if self.gpu else "each save is built (no GPU: build-only verdicts)"
        return f"Manual mode (no model): {where} · to pair with an agent use {MODEL_HELP}"


StartupFactory = Callable[[str | None], Startup]  # argument: the session id to resume, or None
ResumeOffer = tuple[str, str]  # (session id, description for the question)
ResumeFinder = Callable[[], ResumeOffer | None]
