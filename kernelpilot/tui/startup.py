"""What the app starts with: the session and the facts the screen shows about it.

``Startup`` is built off the UI thread by a factory (``build_startup`` for the real command line,
a lambda in tests). Heavy modules (the agent loop, litellm, the evaluator, torch) are imported
inside the factory, never at import time of this module.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
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

    def farewell(self) -> str:
        """What is printed when the app has ended: the session, how to resume it and how to remove it."""
        if not self.session_id:
            return ""
        ws = self.workspace
        records = dict(getattr(ws, "candidates", None) or {})
        unapproved = [cid for cid, rec in records.items() if getattr(rec, "status", "") != "approved"]
        where = f"worktree {self.worktree}" if self.worktree else "no worktree"
        branch = f", branch {ws.branch}" if getattr(ws, "branch", "") else ""
        problem = f" {_shown(Path(self.problem.path))}" if self.problem is not None else ""
        count = f"{len(records)} candidate{'s' if len(records) != 1 else ''}, {len(unapproved)} not approved"
        return (f"kernelpilot session {self.session_id}: {where}{branch}; {count}.\n"
                f"  resume it:  kernelpilot{problem} --resume {self.session_id}\n"
                f"  remove it:  kernelpilot sessions rm {self.session_id}   (its worktree and branch"
                f"{'; with it ' + ', '.join(unapproved) if unapproved else ''}; approved commits stay on your branch)")

    def banner(self) -> str:
        where = "each save is evaluated" if self.gpu else "each save is built (no GPU: build-only verdicts)"
        return f"Manual mode (no model): {where} · to pair with an agent use {MODEL_HELP}"


@dataclass
class CardPreview:
    """What the first screen shows before the session exists (its worktree, engine and GPU are being set up):
    the problem card from the problem file alone, its facts from this machine's cache, and the machine's cached
    baselines: from ``cached`` (a future of the lookup the launcher started before the screen's modules loaded,
    ``machine_cache.lookup_soon``) when given, else looked up when ``settings`` (``() -> EvalSettings``, what that
    cache is keyed on) is given."""

    problem: Path
    manual: bool = True
    settings: Callable[[], Any] | None = None
    cached: Future[Any] | None = None

    @property
    def path(self) -> Path:
        path = Path(self.problem).expanduser()
        return (path / "problem.py" if path.is_dir() else path).resolve()


StartupFactory = Callable[[str | None], Startup]  # argument: the session id to resume, or None
ResumeOffer = tuple[str, str]  # (session id, description for the question)
ResumeFinder = Callable[[], ResumeOffer | None]


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
