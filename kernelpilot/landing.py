"""Approval: land a candidate's files on the engineer's current branch as one commit.

Only the files the candidate changed (relative to the session start) are written, on top of the
branch's current commit, so the engineer may have committed meanwhile. Refused, with nothing
changed, when its last verdict may not be approved (``kernelpilot.approval_rule``: no verdict, a
build error, a crash, a superseded save; incorrect, rejected and build-only verdicts only when the
engineer confirmed that status), when the candidate changes nothing, on a detached HEAD, when the
engineer has uncommitted changes to any of those files, or (unless ``overwrite_committed``) when the
branch changed them since the session started. The commit is made with git plumbing under the engineer's identity;
commit hooks do not run.

``approve`` is what the approving layer calls (the agent's proposal flow, the UI's manual mode): ``land``,
then the drop-in operator of an extracted problem's candidate in the same commit
(``kernelpilot.dropin.on_approve``), then the workspace's record of the approval.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from kernelpilot.approval_rule import check_status, require_approvable
from kernelpilot.dropin.on_approve import register_after_approval
from kernelpilot.errors import WorkspaceError
from kernelpilot.gitcmd import git_run as _git, nul_list as _nul_list

if TYPE_CHECKING:
    from kernelpilot.workspace import Workspace


def approve(ws: Workspace, candidate_id: str, *, overwrite_committed: bool = False, confirmed: str = "") -> str:
    """Land the candidate's files on the engineer's current branch as one commit and return its sha (``land``
    says what is refused: by its last verdict, see ``approval_rule``; ``confirmed`` names the status the
    engineer confirmed, e.g. ``incorrect``). A candidate of an extracted problem gets its drop-in operator
    in that commit (a failure there is a note in ``ws.notes``, never an undone approval)."""
    new = land(ws, candidate_id, overwrite_committed=overwrite_committed, confirmed=confirmed)
    new, note = register_after_approval(ws, candidate_id, new)
    ws.record_approval(candidate_id, new, note)
    return new


def land(ws: Workspace, candidate_id: str, *, overwrite_committed: bool = False, confirmed: str = "") -> str:
    """The new commit's sha on the engineer's branch (the working tree's copies of the files updated).

    Refused first by the candidate's last verdict (``approval_rule.require_approvable``): a verdict that
    needs a confirmation lands only when ``confirmed`` names its status, and the commit says so."""
    sha = ws.resolve(candidate_id)
    record = ws.candidates.get(candidate_id)
    check = require_approvable(check_status(candidate_id, record.verdict if record else "",
                                            record.verdict_summary if record else ""), confirmed)
    paths = ws.changed_files(candidate_id)
    if not paths:
        raise WorkspaceError(f"candidate {candidate_id} changes no files compared with the session start; there is "
                             "nothing to approve.")
    for path in paths:
        rel = PurePosixPath(path)
        ws.rules.check(rel.relative_to(ws.prefix) if str(ws.prefix) != "." else rel)
    user = ws.user_repo
    if user.head.is_detached:
        raise WorkspaceError(
            f"your repository is on a detached HEAD (at {user.head.commit.hexsha[:12]}), so there is no branch to add "
            f"the commit to; check out a branch (e.g. `git switch -c kernelpilot-result`) and approve again."
        )
    branch = user.active_branch.name
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    dirty = [e[3:]
             for e in _nul_list(_git(user, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all",
                                     "--", *paths, env=literal))]
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
            f"{', '.join(moved)} changed on {branch} since the session started; approving would overwrite those "
            "commits, so restore the candidate and re-evaluate it on top of them, or approve with overwrite (nothing "
            "was changed)."
        )
    tree = ws.tree_with(user, head, updates)
    if tree == _git(user, "rev-parse", f"{head}^{{tree}}"):
        raise WorkspaceError(f"{branch} already contains candidate {candidate_id}'s files; there is nothing to "
                             "approve.")
    title = record.message.strip().splitlines()[0] if record and record.message.strip() else f"candidate {candidate_id}"
    verdict = f"Its verdict: {check.status}" + (f" ({check.summary})" if check.summary else "") + "."
    if check.needs_confirmation:
        title = f"[{check.status.upper()}] {title}"
        verdict += f" Approved by the engineer although {check.reason}."
    body = (
        f"kernelpilot: {title}\n\nApproved candidate {candidate_id} of session {ws.session_id} ({sha[:12]}).\n"
        f"{verdict}\n\nKernelpilot-Candidate: {candidate_id}\nKernelpilot-Session: {ws.session_id}\n"
        f"Kernelpilot-Verdict: {check.status}\n"
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
