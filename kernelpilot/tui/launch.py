"""``run_app(args)``: build the real session (off the UI thread) and run the app.

Agent mode (a model, or ``--replay FILE``): an ``AgentSession`` over a new or resumed worktree,
the engine's Evaluator and a litellm or scripted client; the engineer's edits become candidates
of that session. Manual mode (no model): a worktree, the Evaluator, and every save evaluated
(build-only when no GPU is visible). Both get the problem card's sources: the problem, whether a
GPU is visible, and the Evaluator for the baselines, called on one long-lived engine thread.
"""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from kernelpilot.agent.build_only import BuildOnlyEvaluator
from kernelpilot.agent.events import SessionStarted
from kernelpilot.agent.transcript import Transcript, TranscriptError, find_transcript, sessions_dir
from kernelpilot.landing import approve
from kernelpilot.machine import gpu_count
from kernelpilot.problem import load_problem
from kernelpilot.project import resolve_problem
from kernelpilot.sessions import session_exists
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.engine_thread import EngineThread
from kernelpilot.tui.pairing import AgentEditEvaluator, WorkspaceEditEvaluator
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import CardPreview, ResumeOffer, Startup
from kernelpilot.workspace import Workspace


def run_app(args: Any) -> int:
    """Entry from the CLI: ``kernelpilot [PATH] [--model M] [--replay FILE] [--resume [ID]]``."""
    config = _config(args)
    finder = None
    if not getattr(args, "resume", None) and not getattr(args, "replay", None):
        finder = partial(find_resume, config.root, Path(args.problem) if getattr(args, "problem", None) else None)
    app = app_for(args, partial(build_startup, args), finder)
    result = app.run()
    if app.startup is not None and app.startup.farewell():  # the terminal is the shell's again
        print(app.startup.farewell())
    return int(result or 0)


def app_for(args: Any, factory: Any, finder: Any = None) -> KernelpilotApp:
    """The app for these arguments: the session from ``factory`` (off the UI thread), and the problem card
    drawn at once from the problem file and this machine's caches (``CardPreview``), before the session is."""
    config = _config(args)
    problem = getattr(args, "problem", None)
    manual = not (getattr(args, "model", None) or config.model or getattr(args, "replay", None))
    preview = CardPreview(Path(problem), manual=manual, settings=partial(eval_settings, config),
                          cached=getattr(args, "cached_baselines", None)) if problem else None
    return KernelpilotApp(factory, resume_finder=finder, keys=dict(config.keys or {}), preview=preview)


def eval_settings(config: Any) -> Any:
    """The EvalSettings of this project (what the machine's cached baselines are keyed on), imported here
    only when the card's worker asks for them."""
    from kernelpilot.evaluation.settings import EvalSettings

    return EvalSettings.from_config(config)


def _config(args: Any) -> Any:
    config = getattr(args, "config", None)
    if config is None:
        overrides = {"model": args.model} if getattr(args, "model", None) else {}
        config, args.problem = resolve_problem(getattr(args, "path", None), overrides)
        args.config = config
    return config


def _resumed(resume: str | None, config: Any) -> tuple[Any, str | None]:
    """(the transcript, the session id) of the session to resume, (None, None) for a new one."""
    if not resume:
        return None, None
    try:
        path = find_transcript(resume)
    except TranscriptError:
        if not session_exists(config.root, resume):  # neither a transcript nor a session of this repository
            raise
        return None, resume  # a session without a transcript (manual mode): its worktree and branch
    transcript = Transcript(path)
    return transcript, str(transcript.load().header.get("session_id") or path.stem)


def build_startup(args: Any, resume_id: str | None) -> Startup:
    """Runs in a thread worker: the agent loop and the engine are imported here, never at app import (the first
    paint does not wait for them)."""
    from kernelpilot.agent.factory import make_evaluator
    from kernelpilot.agent.loop import candidate_rel

    config = _config(args)
    problem = load_problem(args.problem)
    model = getattr(args, "model", None) or config.model
    replay = getattr(args, "replay", None)
    transcript, session_id = _resumed(resume_id or getattr(args, "resume", None), config)
    workspace = Workspace.open(config.root, session_id, candidate_dir=config.candidate_dir, problem=problem.path)
    watch_dir = workspace.path / candidate_rel(problem, workspace, config)
    evaluator = make_evaluator(config)
    gpu = gpu_count() > 0
    if replay and not gpu:  # a replay needs no GPU: its evaluations are builds
        evaluator = BuildOnlyEvaluator(evaluator)
    engine = EngineThread()
    common: dict[str, Any] = dict(project=str(config.root), session_id=workspace.session_id,
                                  worktree=workspace.path, watch_dir=watch_dir, workspace=workspace,
                                  budgets=dict(config.budgets), notes=list(workspace.notes),
                                  problem=problem, gpu=gpu, evaluator=evaluator, engine=engine)
    if model or replay:
        return _agent_startup(args, config, transcript, common)
    return _manual_startup(common)


def _agent_startup(args: Any, config: Any, transcript: Any, common: dict[str, Any]) -> Startup:
    """An AgentSession with a litellm or scripted client; the engineer's edits become its candidates."""
    # the agent loop, like the engine, is imported in the startup worker (build_startup), never at app import
    from kernelpilot.agent.factory import make_client
    from kernelpilot.agent.loop import AgentSession, Budgets

    workspace = common["workspace"]
    client = make_client(args, config)
    session = AgentSession(common["problem"], workspace, common["evaluator"], client, Budgets.from_config(config),
                           config, transcript=transcript or Transcript.for_session(workspace.session_id),
                           auto_approve=None, session_id=workspace.session_id)
    return Startup(session=session, model=str(client.label), replay=bool(getattr(args, "replay", None)),
                   edit_evaluator=AgentEditEvaluator(session), **common)


def _manual_startup(common: dict[str, Any]) -> Startup:
    """No model: every save evaluated; approval lands the candidate (landing.approve)."""
    workspace, problem, evaluator = common["workspace"], common["problem"], common["evaluator"]
    engine, gpu, watch_dir = common["engine"], common["gpu"], common["watch_dir"]
    started = SessionStarted(session_id=workspace.session_id, problem=problem.name, model="manual",
                             worktree=str(workspace.path), branch=workspace.branch)
    session = EventStreamSession([started], on_approve=partial(approve, workspace), on_reject=workspace.reject)
    # A save's test verdict is drawn first (about a second for a kernel edit), then its benchmark's; no GPU:
    # a build-only verdict (diagnostics, registers and spills, honestly labelled).
    # On a GPU both come from one benchmark (its test verdict handed on before the timing: verified once).
    first = "test" if gpu else "build"
    staged = (lambda d, tested: engine.call(evaluator.evaluate, problem, d, mode="benchmark", on_tested=tested)) \
        if gpu else None
    edit = WorkspaceEditEvaluator(workspace, watch_dir,
                                  lambda d: engine.call(evaluator.evaluate, problem, d, mode=first),
                                  close=evaluator.close, cancel=evaluator.cancel, staged=staged,
                                  before=prebuild(evaluator, watch_dir), defer=evaluator.defer_baselines)
    return Startup(session=session, model="", edit_evaluator=edit, **common)


def prebuild(evaluator: Any, candidate_dir: Path) -> Any:
    """Start the session's first full build of the candidate now, in a thread, so the engineer's first save
    builds only what it changed (a kernel edit: device code alone); returns what waits for it."""
    if not candidate_dir.is_dir() or not any(candidate_dir.glob("*.cu")):
        return None
    thread = threading.Thread(target=evaluator.prebuild, args=(candidate_dir,), name="kp-prebuild", daemon=True)
    thread.start()
    return thread.join


def find_resume(project_root: Path, problem: Path | None) -> ResumeOffer | None:
    """The latest unfinished session of this project (and problem), from the transcript dir."""
    folder = sessions_dir()
    if not folder.is_dir():
        return None
    files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in files[:100]:
        try:
            with path.open(encoding="utf-8") as fh:
                header = json.loads(fh.readline() or "{}")
        except (OSError, ValueError):
            continue
        if header.get("type") != "header" or Path(header.get("project_root") or "/nonexistent") != Path(project_root):
            continue
        if problem is not None and Path(header.get("problem", "")).resolve() != Path(problem).resolve():
            continue
        try:
            state = Transcript(path).load()
        except Exception:  # a damaged transcript is not offered
            return None
        done = [e for e in state.events if e.kind == "done"]
        reason = getattr(done[-1], "reason", "") if done else "interrupted"
        if reason in ("proposal_approved", "finished"):
            return None
        turns = sum(1 for e in state.events if e.kind == "assistant_message")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(header.get("created") or path.stat().st_mtime)))
        sid = str(header.get("session_id") or path.stem)
        if not session_exists(Path(project_root), sid):  # removed (`kernelpilot sessions rm`): its transcript stays
            continue
        return sid, f"session {sid} from {when} ({turns} turns, {len(state.candidates)} candidates, {reason})"
    return None
