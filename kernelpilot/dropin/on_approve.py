"""After approval: the drop-in operator of a candidate of an extracted problem, in the same commit.

``kernelpilot.landing.approve`` lands the candidate's files (``landing.land``), then calls this: when they sit in
``<problem dir>/candidate/`` of a problem ``kernelpilot hotspots --extract`` wrote (``origin.json``),
this writes the registration beside them in the engineer's checkout (``kernelpilot.dropin.registration``,
gradient check included) and replaces the approval commit by one that also holds those files (the
branch moves only if it still points at the approval commit). A failure here never undoes the
approval: it is returned as a note.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from kernelpilot.dropin.registration import Registration, problem_dir_of, write_registration
from kernelpilot.errors import KernelpilotError
from kernelpilot.gitcmd import git_run


def apply_command_for(problem_dir: Path, script: str) -> str:
    return f"kernelpilot apply {script} --kernels {problem_dir.parent}"


def candidate_dir_of(paths: list[str], top: Path) -> Path | None:
    dirs = {PurePosixPath(p).parent for p in paths}
    for d in sorted(dirs, key=lambda d: len(d.parts)):
        candidate = top / d
        if problem_dir_of(candidate) is not None:
            return candidate
    return None


def register_after_approval(ws: Any, candidate_id: str, commit: str) -> tuple[str, str]:
    """(the commit now on the branch, a note for the engineer: what was written, or why not)."""
    user = ws.user_repo
    top = Path(user.working_tree_dir)
    candidate = candidate_dir_of(ws.changed_files(candidate_id), top)
    if candidate is None:
        return commit, ""
    try:
        reg: Registration = write_registration(candidate, candidate_id=candidate_id)
    except (KernelpilotError, OSError) as exc:
        return commit, f"the drop-in operator was not written: {exc}"
    updates: dict[str, tuple[str, str] | None] = {}
    for file in reg.files:
        rel = file.relative_to(top).as_posix()
        updates[rel] = ("100644", git_run(user, "hash-object", "-w", "--", rel))
    parent = git_run(user, "rev-parse", f"{commit}^")
    tree = ws.tree_with(user, commit, updates)
    message = git_run(user, "log", "-1", "--format=%B", commit)
    amended = git_run(user, "commit-tree", tree, "-p", parent, stdin=message.encode())
    branch = user.active_branch.name
    git_run(user, "update-ref", "-m", f"kernelpilot: drop-in operator of {candidate_id}", f"refs/heads/{branch}",
            amended, commit)
    for rel, entry in updates.items():  # the index follows the new commit for these paths
        assert entry is not None
        git_run(user, "update-index", "--add", "--cacheinfo", f"{entry[0]},{entry[1]},{rel}")
    problem_dir = problem_dir_of(candidate)
    assert problem_dir is not None
    training = "training too" if reg.training else "inference only"
    note = (f"drop-in operator torch.ops.{reg.op.replace('::', '.')} written in {candidate.relative_to(top)}/dropin.py "
            f"({training}: {reg.gradient}); apply it with "
            f"`{apply_command_for(problem_dir.relative_to(top), _script(problem_dir))}`")
    return amended, note


def _script(problem_dir: Path) -> str:
    try:
        return str(json.loads((problem_dir / "origin.json").read_text()).get("script") or "SCRIPT")
    except (OSError, ValueError):
        return "SCRIPT"
