"""The ``kernelpilot`` command: argument parsing, up-front checks, lazy dispatch.

Every argument of every subcommand is defined in cli_parser.py, so ``--help`` is complete. The implementation
of each subcommand lives elsewhere and is imported only when that subcommand runs; it receives the
parsed ``argparse.Namespace`` with, in addition to the flags, these resolved attributes:
``command`` (``pair``, ``run``, ``eval``, ``init``, ``skills``, ``hotspots``, ``apply``, ``sessions``, ...), ``config``
(``ProjectConfig``, flags already applied, for pair/run/eval), ``problem`` (absolute ``Path``,
checked by ``load_problem``), ``candidate`` (absolute ``Path`` or None) and ``project_root``.
This module imports neither torch nor textual nor litellm.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelpilot.cli_parser import build_parser
from kernelpilot.errors import (CandidateNotFoundError, InstallError, KernelpilotError, ModelConfigError,
                                NotFoundError, UsageError)
from kernelpilot.machine import require_gpu
from kernelpilot.project import require_git, resolve_problem

IMPLEMENTATIONS = {
    "pair": "kernelpilot.tui.launch:run_app",
    "run": "kernelpilot.agent.headless:run_command",
    "eval": "kernelpilot.evaluation.command:run_eval",
    "init": "kernelpilot.starter:init_command",
    "skills": "kernelpilot.skills:skills_command",
    "hotspots": "kernelpilot.profiling.hotspots:hotspots_command",
    "profile": "kernelpilot.profiling.command:profile_command",
    "suite": "kernelpilot.suite.command:run_suite",
    "report": "kernelpilot.suite.command:run_report",
    "apply": "kernelpilot.dropin.apply_command:apply_command",
    "doctor": "kernelpilot.doctor:doctor_command",
    "sessions": "kernelpilot.sessions:sessions_command",
}

SUBCOMMANDS = ("run", "eval", "profile", "init", "skills", "hotspots", "pair", "suite", "report", "apply", "sessions",
               "doctor")


# ---- checks -----------------------------------------------------------------------------------


def _flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = {"model": "model", "api_base": "api_base", "max_turns": "max_turns", "max_tokens": "max_tokens",
             "budget_usd": "max_cost_usd", "max_wall": "max_wall_s", "trials": "trials", "compile_mode": "compile_mode",
             "cuda_graphs": "cuda_graphs", "timeout": "timeout_s"}
    out = {key: getattr(args, flag) for flag, key in names.items() if getattr(args, flag, None) is not None}
    if getattr(args, "candidate", None) and args.command == "run":
        out["candidate_dir"] = str(Path(args.candidate).resolve())
    return out


def prepare(args: argparse.Namespace) -> None:
    """The checks that fail fast with one sentence, and the resolved attributes for implementations."""
    command = args.command
    if command in ("pair", "run", "eval", "suite", "profile", "hotspots", "apply"):
        _bytecode_cache()
    if command in ("pair", "run"):
        path = args.path if command == "pair" else args.problem
        if getattr(args, "replay", None) and not Path(args.replay).is_file():
            raise NotFoundError(f"replay file {args.replay} does not exist; pass a JSONL transcript written by "
                                "`kernelpilot run --jsonl` or the UI.")
        if command == "run" and args.candidate and not Path(args.candidate).is_dir():
            raise CandidateNotFoundError(f"candidate directory {args.candidate} does not exist; create it or leave out "
                                         "--candidate.")
        args.config, args.problem = resolve_problem(path, _flag_overrides(args))
        args.project_root = args.config.root
        args.candidate = args.config.candidate_dir
        require_git(args.problem)
        if command == "pair":
            args.cached_baselines = _cached_baselines_soon(args.problem, args.config)
        if command == "run":
            if not args.replay and not args.watch and not args.config.model:
                raise ModelConfigError("no model is configured; pass --model (e.g. anthropic/claude-sonnet-4-5), set "
                                       "KERNELPILOT_MODEL, or add `model = \"...\"` to kernelpilot.toml (or use "
                                       "--watch to pair without an LLM).")
            if not args.replay:
                require_gpu("`kernelpilot run`", "replay a transcript with --replay")
    elif command == "eval":
        candidate = Path(args.candidate).expanduser()
        args.config, args.problem = resolve_problem(args.problem, _flag_overrides(args))
        if not candidate.exists():
            raise CandidateNotFoundError(f"candidate {candidate} does not exist; pass a candidate directory "
                                         "(model_new.py + kernels) or a ModelNew .py file.")
        args.candidate = candidate.resolve()
        args.project_root = args.config.root
        if args.mode != "build":
            require_gpu(f"`kernelpilot eval --mode {args.mode}`", "use `--mode build` to only compile")
    elif command == "profile":
        candidate = Path(args.candidate).expanduser()
        _config, args.problem = resolve_problem(args.problem, {})
        if not candidate.exists():
            raise CandidateNotFoundError(f"candidate {candidate} does not exist; pass a candidate directory "
                                         "(model_new.py + kernels) or a ModelNew .py file.")
        if args.verdict and not Path(args.verdict).is_file():
            raise NotFoundError(f"verdict file {args.verdict} does not exist; write one with `kernelpilot eval PROBLEM "
                                "CANDIDATE --json > FILE`.")
        args.candidate = candidate.resolve()
        require_gpu("`kernelpilot profile`", "profile on a machine with a GPU")
    elif command in ("hotspots", "apply"):
        if not Path(args.script).is_file():
            raise NotFoundError(f"script {args.script} does not exist; pass the Python script to profile (options go "
                                "before it).")


def _bytecode_cache() -> None:
    """Where torch has no bytecode and may not write any (evaluation/sandbox/bytecode.py), kernelpilot's own cache:
    this process reads it when written, and a writer starts when it is not (the processes started later read it)."""
    from kernelpilot.evaluation.sandbox import bytecode

    bytecode.use_here()
    bytecode.write_soon()


def _cached_baselines_soon(problem: Path, config: Any) -> Any:
    """The machine's cached baselines of this problem (a future), looked up on a thread from now on, while the
    screen's modules load: the card shows them as soon as it is drawn (2026-12-06, H200: 1.51 s after launch when
    the lookup waited for the card)."""
    from kernelpilot.evaluation.baselines.machine_cache import lookup_soon
    from kernelpilot.evaluation.settings import EvalSettings

    return lookup_soon(problem, lambda: EvalSettings.from_config(config))


def dispatch(args: argparse.Namespace) -> int:
    target = IMPLEMENTATIONS[args.command]
    module_name, func_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise InstallError(f"`{_shown(args.command)}` is not available in this installation ({module_name} is "
                               "missing); reinstall kernelpilot.") from None
        raise InstallError(f"`{_shown(args.command)}` needs the Python package {exc.name!r}, which is not installed; "
                           f"install it (pip install {exc.name}).") from None
    func = getattr(module, func_name, None)
    if func is None:
        raise InstallError(f"`{_shown(args.command)}` is not available in this installation ({target} is missing); "
                           "reinstall kernelpilot.")
    result = func(args)
    return int(result or 0)


def _shown(command: str) -> str:
    return "kernelpilot" if command == "pair" else f"kernelpilot {command}"


# ---- machine-readable errors -------------------------------------------------------------------

MACHINE_FLAGS = ("--json", "--jsonl")  # the flags that make stdout JSON, on any subcommand that has one


def wants_json(argv: Sequence[str]) -> bool:
    """Whether this command line asks for machine-readable output (read before parsing, so that an
    argument error is JSON too). Arguments after ``--`` and a profiled script's own are not ours."""
    if not argv or argv[0] in ("hotspots", "apply"):
        return False
    ours = argv[: argv.index("--")] if "--" in argv else argv
    return any(token in MACHINE_FLAGS for token in ours)


def print_error(message: str, kind: str, machine: bool) -> None:
    """One JSON object on stdout with ``--json``/``--jsonl``; otherwise ``kernelpilot: message`` on stderr."""
    if machine:
        sys.stdout.write(json.dumps({"error": message, "kind": kind}) + "\n")
        sys.stdout.flush()
    else:
        print(f"kernelpilot: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["pair", *argv]
    machine = wants_json(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        machine = bool(getattr(args, "json", False) or getattr(args, "jsonl", False))
        prepare(args)
        return dispatch(args)
    except UsageError as exc:
        if machine:
            print_error(str(exc), exc.kind, True)
        elif isinstance(exc.parser, argparse.ArgumentParser):  # exactly what argparse prints
            exc.parser.print_usage(sys.stderr)
            print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
        else:
            print_error(str(exc), exc.kind, False)
        return exc.exit_code
    except KernelpilotError as exc:
        print_error(str(exc), exc.kind, machine)
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted.", "interrupted", machine)
        return 130
    except Exception as exc:
        if not machine:
            raise
        traceback.print_exc()  # the details for a bug report, on stderr; stdout stays JSON
        print_error(f"internal error: {type(exc).__name__}: {exc}; please report it with the traceback printed on "
                    "stderr.",
                    "internal", True)
        return 1
