"""Where a session lives, checked before its worktree is made: the engineer's repository (a checkout with a
commit), the session id (a usable branch name) and the worktree directory outside that repository."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from kernelpilot.errors import WorkspaceError
from kernelpilot.guard import normalize

_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def data_dir() -> Path:
    """Where worktrees live: ``$KERNELPILOT_DATA_DIR``, else platformdirs' user data dir."""
    override = os.environ.get("KERNELPILOT_DATA_DIR")
    if override:
        return Path(override).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("kernelpilot")).resolve()


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def project_rel(path: str | Path, project_root: Path) -> str:
    """``path`` (absolute, or relative to the project root) relative to the project root."""
    p = Path(path).expanduser()
    if p.is_absolute():
        try:
            return p.resolve().relative_to(project_root).as_posix()
        except ValueError:
            raise WorkspaceError(f"{p} is outside the project {project_root}; keep the problem and candidates "
                                 "inside it.") from None
    return normalize(p).as_posix()


def open_user_repo(project_root: Path) -> tuple[Any, Path, str]:
    """The engineer's repository holding ``project_root``, its top level and its HEAD commit."""
    import git

    try:
        user_repo = git.Repo(project_root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise WorkspaceError(
            f"{project_root} is not inside a git repository; kernelpilot works on a branch of your repository, "
            "so run `git init && git add -A && git commit -m initial` there first (kernelpilot never does this "
            "for you)."
        ) from None
    if user_repo.bare:
        raise WorkspaceError(f"{user_repo.git_dir} is a bare repository; run kernelpilot in a checkout with a "
                             "working tree.")
    top = Path(user_repo.working_tree_dir).resolve()
    try:
        head_sha = user_repo.head.commit.hexsha
    except ValueError:
        raise WorkspaceError(f"the repository at {top} has no commits yet; commit your files first "
                             "(`git add -A && git commit -m initial`).") from None
    return user_repo, top, head_sha


def worktree_dir(session_id: str, top: Path) -> Path:
    """The worktree directory of session ``session_id``, outside the repository at ``top``."""
    if not _SESSION_RE.match(session_id) or ".." in session_id or session_id.endswith((".lock", ".")):
        raise WorkspaceError(f"session id {session_id!r} is not usable as a branch name; use letters, digits, "
                             "'.', '_' and '-'.")
    worktree = data_dir() / "worktrees" / session_id
    if worktree == top or top in worktree.parents:
        raise WorkspaceError(f"the worktree directory {worktree} would be inside your repository; point "
                             f"KERNELPILOT_DATA_DIR outside {top}.")
    return worktree
