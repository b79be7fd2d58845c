"""Which project and problem a path on the command line means (shared by the CLI and the UI).

``resolve_problem`` turns a problem file, a project directory or nothing (the current directory)
into the project configuration and the absolute problem path; ``require_git`` finds the repository
kernelpilot works in. Neither imports torch. config and problem are imported inside them: the CLI imports
this module, and ``kernelpilot --help`` does not need them (about 10 ms of its start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.errors import ProblemError, ProblemNotFoundError, WorkspaceError


def require_git(where: Path) -> Path:
    from kernelpilot.config_file import find_git_root

    directory = where if where.is_dir() else where.parent
    root = find_git_root(directory.resolve())
    if root is None:
        raise WorkspaceError(f"{directory.resolve()} is not inside a git repository; kernelpilot works on a branch of "
                             "your repository, so run `git init && git add -A && git commit -m initial` there first.")
    return root


def resolve_problem(path_arg: str | None, overrides: dict[str, Any]) -> tuple[Any, Path]:
    """(config, problem path) from a problem file, a directory, or the config's ``problem``."""
    from kernelpilot.config import load_config
    from kernelpilot.problem import load_problem

    target = Path(path_arg).expanduser() if path_arg else Path.cwd()
    if not target.exists():
        raise ProblemNotFoundError(f"{target} does not exist; pass a problem file in KernelBench format or a project "
                                   "directory (see `kernelpilot init`).")
    if target.is_file():
        load_problem(target)
        config = load_config(start=target.parent, overrides={**overrides, "problem": str(target.resolve())})
        return config, target.resolve()
    config = load_config(start=target, overrides=overrides)
    if config.problem is None and (target / "problem.py").is_file():
        config = load_config(start=target, overrides={**overrides, "problem": str((target / "problem.py").resolve())})
    if config.problem is None:
        raise ProblemError(f"no problem found in {target.resolve()}: pass a problem file, add `problem = \"...\"` to "
                           "kernelpilot.toml, or run `kernelpilot init`.")
    load_problem(config.problem)
    return config, config.problem
