"""git through GitPython's command runner, with git's own words in a WorkspaceError when it fails."""

from __future__ import annotations

import tempfile
from typing import Any

from kernelpilot.errors import WorkspaceError


def git_run(repo: Any, *args: str, env: dict[str, str] | None = None, raw: bool = False,
            stdin: bytes | None = None) -> Any:
    """Run git in ``repo``; GitCommandError becomes a WorkspaceError quoting git's own words."""
    import git

    try:
        return repo.git.execute(
            ["git", *args], env=env, stdout_as_string=not raw, strip_newline_in_stdout=not raw,
            istream=None if stdin is None else _stdin(stdin),
        )
    except git.GitCommandError as exc:
        detail = (exc.stderr or "").strip().splitlines()
        said = detail[-1].removeprefix("stderr: ").strip(" '") if detail else f"exit status {exc.status}"
        if "tell me who you are" in (exc.stderr or "") or "empty ident" in (exc.stderr or ""):
            raise WorkspaceError("git does not know who you are; run `git config user.name \"Your Name\"` and `git "
                                 "config user.email you@example.com`, then try again.") from None
        raise WorkspaceError(f"`git {args[0]}` failed in {repo.working_dir}: {said}; fix that and try again.") from None


def _stdin(data: bytes) -> Any:
    handle = tempfile.TemporaryFile()
    handle.write(data)
    handle.seek(0)
    return handle


def nul_list(text: str) -> list[str]:
    """The items of git's ``-z`` output."""
    return [item for item in text.split("\0") if item]
