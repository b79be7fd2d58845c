"""Approval: land a candidate's files on the engineer's current branch as one commit.

Only the files the candidate changed (relative to the session start) are written, on top of the
branch's current commit, so the engineer may have committed meanwhile. Refused, with nothing
changed, when the candidate changes nothing, on a detached HEAD, when the engineer has uncommitted
changes to any of those files, or (unless ``overwrite_committed``) when the branch changed them
since the session started. The commit is made with git plumbing under the engineer's identity;
commit hooks do not run.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from kernelpilot.errors import WorkspaceError
from kernelpilot.workspace import _git, _nul_list

if TYPE_CHECKING:
    from kernelpilot.workspace import Workspace


def land(ws: Workspace, candidate_id: str, *, overwrite_committed: bool = False) -> str:
    """The new commit's sha on the engineer's branch (the working tree's copies of the files updated)."""
    sha = ws.resolve(candidate_id)
    paths = ws.changed_files(candidate_id)
    if not paths:
        raise WorkspaceError(f"candidate {candidate_id} changes no files compared with the session start; there is nothing to approve.")
    for path in paths:
        rel = PurePosixPath(path)
        ws.rules.check(rel.relative_to(ws.prefix) if str(ws.prefix) != "." else rel)
    user = ws.user_repo
    if user.head.is_detached:
        raise WorkspaceError(
            f"your repository is on a detached HEAD (at {user.head.commit.hexsha[:12]}), so there is no branch to add the commit to; "
            f"check out a branch (e.g. `git switch -c kernelpilot-result`) and approve again."
        )
    branch = user.active_branch.name
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    dirty = [e[3:] for e in _nul_list(_git(user, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all", "--", *paths, env=literal))]
    if dirty:
        raise WorkspaceError(
            f"you have uncommitted changes to {', '.join(dirty)}, which candidate {candidate_id} also changes; "
            f"commit or stash them and approve again (nothing was changed)."
        )
    try:
        head = user.head.commit.hexsha
    except ValueError:
        raise WorkspaceError(f"branch {branch} has no commits; commit something first, then approve again.") from None

    def blob(commit: str, path: str) -> tuple[str, str] | None:
        out = _git(user, "ls-tree", "-z", commit, "--", path, env=literal)
        if not out:
            return None
        meta = out.split("\t", 1)[0].split()
        return meta[0], meta[2]

    updates = {p: blob(sha, p) for p in paths}
    moved = [p for p in paths if blob(head, p) not in (blob(ws.base_sha, p), updates[p])]
    if moved and not overwrite_committed:
        raise WorkspaceError(
            f"{', '.join(moved)} changed on {branch} since the session started; approving would overwrite those commits, "
            f"so restore the candidate and re-evaluate it on top of them, or approve with overwrite (nothing was changed)."
        )
    tree = ws.tree_with(user, head, updates)
    if tree == _git(user, "rev-parse", f"{head}^{{tree}}"):
        raise WorkspaceError(f"{branch} already contains candidate {candidate_id}'s files; there is nothing to approve.")
    record = ws.candidates.get(candidate_id)
    title = record.message.strip().splitlines()[0] if record and record.message.strip() else f"candidate {candidate_id}"
    body = (
        f"kernelpilot: {title}\n\nApproved candidate {candidate_id} of session {ws.session_id} ({sha[:12]}).\n\n"
        f"Kernelpilot-Candidate: {candidate_id}\nKernelpilot-Session: {ws.session_id}\n"
    )
    new = _git(user, "commit-tree", tree, "-p", head, stdin=body.encode())
    _git(user, "update-ref", "-m", f"kernelpilot: approve {candidate_id}", f"refs/heads/{branch}", new, head)
    present = [p for p in paths if updates[p]]
    if present:
        _git(user, "checkout", new, "--", *present, env=literal)
    for path in (p for p in paths if not updates[p]):
        _git(user, "rm", "-q", "--cached", "--ignore-unmatch", "--", path, env=literal)
        (Path(user.working_tree_dir) / path).unlink(missing_ok=True)
    return new
