"""``kernelpilot sessions``: the pairing sessions of this repository, and removing them.

A session is a worktree under the user data directory on a ``kernelpilot/<id>`` branch, with kernelpilot's
record of it in the repository's git dir (``.git/kernelpilot/sessions/<id>.json``: problem, start time,
candidates and which were approved). ``list_sessions`` reads those records (and notices a
``kernelpilot/*`` branch whose record was lost); ``remove_session`` deletes the session's worktree, its
branch and that record, nothing else: approved candidates are commits on the engineer's own branch and stay,
and the transcript (user data directory, ``sessions/<id>.jsonl``) is kept.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError, UsageError, WorkspaceError
from kernelpilot.gitcmd import git_run

BRANCH_PREFIX = "kernelpilot/"


@dataclass
class SessionInfo:
    session_id: str
    problem: str = ""  # relative to the project root; "" when the record does not say
    created: float = 0.0
    worktree: Path | None = None
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> the record's entry
    has_branch: bool = False
    recorded: bool = True  # kernelpilot's record of it exists (False: only the branch is left)

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.session_id

    @property
    def unapproved(self) -> list[str]:
        """Candidates not landed on the engineer's branch: removing the session removes them."""
        return [cid for cid, rec in self.candidates.items() if rec.get("status") != "approved"]

    def unapproved_text(self) -> str:
        """``e1 (build_error), c2 (ok)``: the unapproved candidates with their last verdicts."""
        return ", ".join(f"{cid} ({self.candidates[cid].get('verdict') or 'no verdict'})" for cid in self.unapproved)

    def created_text(self) -> str:
        when = self.created or _time_from_id(self.session_id)
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(when)) if when else "?"


def _time_from_id(session_id: str) -> float:
    """Session ids start with their creation time (``20261205-231754-cc486f``)."""
    try:
        return time.mktime(time.strptime(session_id[:15], "%Y%m%d-%H%M%S"))
    except ValueError:
        return 0.0


def open_repository(start: Path) -> Any:
    import git

    try:
        return git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise WorkspaceError(f"{start.resolve()} is not inside a git repository; run `kernelpilot sessions` in the "
                             "repository whose sessions you want to see.") from None


def _records_dir(repo: Any) -> Path:
    return Path(repo.common_dir).resolve() / "kernelpilot" / "sessions"


def list_sessions(repo: Any) -> list[SessionInfo]:
    """This repository's sessions, oldest first."""
    found: dict[str, SessionInfo] = {}
    records = _records_dir(repo)
    for path in sorted(records.glob("*.json")) if records.is_dir() else []:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        sid = str(data.get("session") or path.stem)
        found[sid] = SessionInfo(sid, problem=_problem(repo, data), created=float(data.get("created") or 0),
                                 worktree=Path(data["worktree"]) if data.get("worktree") else None,
                                 candidates=dict(data.get("candidates") or {}))
    for line in git_run(repo, "branch", "--list", "--format=%(refname:short)", BRANCH_PREFIX + "*").splitlines():
        sid = line.strip().removeprefix(BRANCH_PREFIX)
        if sid:
            found.setdefault(sid, SessionInfo(sid, recorded=False)).has_branch = True
    return sorted(found.values(), key=lambda s: (s.created or _time_from_id(s.session_id), s.session_id))


def _problem(repo: Any, data: dict[str, Any]) -> str:
    """The record's problem file, relative to the repository's top (it is kept relative to the project root)."""
    problem = str(data.get("problem") or "")
    if not problem or not data.get("project_root"):
        return problem
    try:
        return str((Path(data["project_root"]) / problem).relative_to(Path(repo.working_tree_dir).resolve()))
    except ValueError:
        return problem


def session_exists(project_root: Path, session_id: str) -> bool:
    """Whether ``session_id`` is still a session of the repository holding ``project_root`` (not removed)."""
    try:
        repo = open_repository(project_root)
    except WorkspaceError:
        return False
    return (_records_dir(repo) / f"{session_id}.json").is_file() or bool(
        git_run(repo, "branch", "--list", BRANCH_PREFIX + session_id))


def remove_session(repo: Any, info: SessionInfo) -> list[str]:
    """Delete the session's worktree, its branch and kernelpilot's record of it; returns what was removed."""
    removed: list[str] = []
    git_run(repo, "worktree", "prune")  # a worktree folder deleted by hand is forgotten first
    registered = {Path(line[len("worktree "):]).resolve()
                  for line in git_run(repo, "worktree", "list", "--porcelain").splitlines()
                  if line.startswith("worktree ")}
    if info.worktree is not None and info.worktree.resolve() in registered:
        git_run(repo, "worktree", "remove", "--force", str(info.worktree))
        removed.append(f"worktree {info.worktree}")
    if git_run(repo, "branch", "--list", info.branch):
        git_run(repo, "branch", "-D", info.branch)
        removed.append(f"branch {info.branch}")
    record = _records_dir(repo) / f"{info.session_id}.json"
    if record.is_file():
        record.unlink()
        removed.append("its record in " + str(record.parent))
    return removed


def table(sessions: list[SessionInfo]) -> str:
    rows = [("id", "problem", "created", "branch", "candidates", "unapproved")]
    for s in sessions:
        count = str(len(s.candidates)) if s.recorded else "?"
        unapproved = str(len(s.unapproved)) if s.recorded else "?"
        rows.append((s.session_id, s.problem or "?", s.created_text(), s.branch if s.has_branch or s.recorded else "-",
                     count, unapproved))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def _confirm(question: str) -> bool:
    print(question + " [y/N] ", end="", flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def sessions_command(args: Any) -> int:
    """``kernelpilot sessions`` (list) and ``kernelpilot sessions rm ID|--all [--yes]``."""
    repo = open_repository(Path.cwd())
    sessions = list_sessions(repo)
    if args.action == "list":
        if args.session or args.all:
            raise UsageError("`kernelpilot sessions` lists; to remove, run `kernelpilot sessions rm ID` (or --all).")
        if not sessions:
            print(f"no kernelpilot sessions in {repo.working_tree_dir}")
            return 0
        print(table(sessions))
        print("resume one: kernelpilot PROBLEM --resume ID · remove one: kernelpilot sessions rm ID (--all: every one)")
        return 0
    if bool(args.session) == bool(args.all):
        raise UsageError("name the session to remove (`kernelpilot sessions rm ID`) or pass --all, not both.")
    chosen = sessions if args.all else [s for s in sessions if s.session_id == args.session]
    if not chosen:
        known = ", ".join(s.session_id for s in sessions) or "none"
        if args.all:
            print(f"no kernelpilot sessions in {repo.working_tree_dir}; nothing to remove")
            return 0
        raise KernelpilotError(f"no session {args.session!r} in {repo.working_tree_dir}; its sessions: {known} "
                               "(`kernelpilot sessions` lists them).")
    for info in chosen:
        lost = info.unapproved_text()
        what = (f"session {info.session_id} ({info.problem or 'problem unknown'}): worktree {info.worktree or '-'}, "
                f"branch {info.branch}")
        print(f"{what}; unapproved candidates removed with it: {lost}" if lost
              else f"{what}; no unapproved candidates")
    if not args.yes and not _confirm(f"Remove {'these sessions' if len(chosen) > 1 else 'this session'}?"):
        print("nothing was removed")
        return 1
    for info in chosen:
        removed = remove_session(repo, info)
        print(f"removed session {info.session_id}: {', '.join(removed) or 'nothing was left of it'}")
    return 0
