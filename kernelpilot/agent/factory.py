"""The parts of an agent session, made from parsed arguments (``kernelpilot run``'s, the UI's, the suite's
agent mode) and the project config: the model client, the evaluator and the AgentSession itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.agent.build_only import for_replay
from kernelpilot.agent.litellm_client import LiteLLMClient
from kernelpilot.agent.loop import AgentSession, Budgets
from kernelpilot.agent.scripted import ScriptedClient
from kernelpilot.agent.transcript import Transcript, find_transcript
from kernelpilot.config import load_config
from kernelpilot.errors import KernelpilotError, ModelConfigError
from kernelpilot.problem import load_problem
from kernelpilot.workspace import Workspace


def make_client(args: Any, config: Any) -> Any:
    if getattr(args, "replay", None):
        return ScriptedClient(Path(args.replay))
    model = getattr(args, "model", None) or getattr(config, "model", None)
    if not model:
        raise ModelConfigError("no model is configured; pass --model (e.g. anthropic/claude-sonnet-4-5) or use "
                               "--replay FILE.")
    return LiteLLMClient(model, api_base=getattr(args, "api_base", None) or getattr(config, "api_base", None))


def make_evaluator(config: Any) -> Any:
    from kernelpilot.evaluation import EvalSettings, Evaluator

    return Evaluator(EvalSettings.from_config(config), standby_builder=True)  # a session builds many candidates


def build_session(args: Any, *, evaluator: Any = None, client: Any = None) -> Any:
    """The AgentSession for parsed ``kernelpilot run`` arguments (new or resumed)."""
    config = getattr(args, "config", None)
    problem_path = getattr(args, "problem", None)
    resume = getattr(args, "resume", None)
    session_id = None
    transcript = None
    if resume:
        path = find_transcript(resume)
        transcript = Transcript(path)
        header = transcript.load().header
        session_id = str(header.get("session_id") or path.stem)
        if problem_path is None or config is None:
            problem_path = Path(header["problem"])
            config = load_config(Path(header.get("project_root") or problem_path.parent),
                                 overrides={"problem": str(problem_path)})
        elif Path(header.get("problem", problem_path)).resolve() != Path(problem_path).resolve():
            raise KernelpilotError(f"session {session_id} was for {header.get('problem')}; run `kernelpilot run "
                                   f"{header.get('problem')} --resume {session_id}`.")
    if config is None:
        config = load_config(Path(problem_path).parent if problem_path else None,
                             overrides={"problem": str(problem_path)} if problem_path else None)
        problem_path = problem_path or config.problem
    if problem_path is None:
        raise KernelpilotError("no problem given; pass a problem file or set `problem` in kernelpilot.toml.")
    problem = load_problem(problem_path)
    workspace = Workspace.open(config.root, session_id, candidate_dir=config.candidate_dir, problem=problem.path)
    if transcript is None:
        transcript = Transcript.for_session(workspace.session_id)
    budgets = Budgets.from_config(config)
    if evaluator is None:  # a replay needs no GPU: without one, its evaluations are builds
        evaluator = for_replay(make_evaluator(config), bool(getattr(args, "replay", None)))
    return AgentSession(
        problem, workspace, evaluator,
        client if client is not None else make_client(args, config), budgets, config,
        transcript=transcript, auto_approve=getattr(args, "auto_approve", None) or "never",
        session_id=workspace.session_id,
    )
