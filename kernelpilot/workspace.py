"""A pairing session's git worktree: guarded writes, a commit per candidate, approve/reject/restore.

The worktree lives outside the user's tree (``$KERNELPILOT_DATA_DIR`` or the platform's user data
dir, ``worktrees/<session>``) on branch ``kernelpilot/<session>``, created from the user's HEAD.
Uncommitted changes in the user's tree are not in it. Each evaluated candidate becomes one commit
on that branch (built from the candidate files only, with git plumbing, so nothing else the
engineer staged sneaks in). The candidate id -> commit map is kept as JSON in the repository's
git dir (``.git/kernelpilot/sessions/<session>.json``) and in a ``Kernelpilot-Candidate`` trailer
of each commit, so a session survives a restart and even ``cleanup``. Approving (landing the files on
the engineer's branch) is ``kernelpilot.landing.approve``'s, called by the layer that approves; it records
the approval here.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kernelpilot.approval_rule import check_approval
from kernelpilot.errors import GuardError, WorkspaceError
from kernelpilot.gitcmd import git_run as _git, nul_list as _nul_list
from kernelpilot.guard import PathRules, default_globs, normalize
from kernelpilot.session_repo import new_session_id, open_user_repo, project_rel, worktree_dir

BOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "kernelpilot", "GIT_AUTHOR_EMAIL": "kernelpilot@localhost",
    "GIT_COMMITTER_NAME": "kernelpilot", "GIT_COMMITTER_EMAIL": "kernelpilot@localhost",
}
NOTES_REF = "refs/notes/kernelpilot"


@dataclass
class CandidateRecord:
    sha: str
    message: str
    status: str = "checkpoint"  # checkpoint | approved | rejected
    reason: str = ""
    approved_sha: str = ""
    verdict: str = ""  # the last verdict's shown status (approval_rule.shown_status); "" before any
    verdict_summary: str = ""


@dataclass
class Workspace:
    """One session's worktree. Paths given to its methods are relative to the project root."""

    user_repo: Any
    repo: Any
    session_id: str
    path: Path  # the project root inside the worktree (the worktree root for a top-level project)
    worktree_root: Path
    prefix: PurePosixPath  # project root relative to the repository's top level
    base_sha: str
    rules: PathRules
    candidates: dict[str, CandidateRecord] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problem: str = ""  # the problem file, relative to the project root ("" when unknown)
    created: float = 0.0  # Unix time the session started
    project_root: Path | None = None  # the engineer's project directory (in their checkout)

    # ---- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        project_root: str | Path,
        session_id: str | None = None,
        *,
        candidate_dir: str | Path | None = None,
        candidate_files: list[str] | None = None,
        problem: str | Path | None = None,
    ) -> Workspace:
        """Create (or reopen, for an existing session id) the worktree for ``project_root``."""
        import git

        project_root = Path(project_root).resolve()
        user_repo, top, head_sha = open_user_repo(project_root)
        prefix = PurePosixPath(project_root.relative_to(top).as_posix())
        session_id = session_id or new_session_id()
        worktree = worktree_dir(session_id, top)
        branch = f"kernelpilot/{session_id}"
        state = cls._state_path(user_repo, session_id)
        saved = json.loads(state.read_text()) if state.is_file() else {}
        notes: list[str] = []
        registered = [
            Path(line[len("worktree "):]).resolve()
            for line in _git(user_repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")
        ]
        branch_exists = bool(_git(user_repo, "branch", "--list", branch))
        if worktree in registered:
            pass  # reopening a live session
        elif branch_exists:
            if worktree.exists():
                raise WorkspaceError(f"{worktree} exists but is not a worktree of {top}; remove that directory and try "
                                     "again.")
            _git(user_repo, "worktree", "prune")
            _git(user_repo, "worktree", "add", str(worktree), branch)
            notes.append(f"Reopened session {session_id} from branch {branch}.")
        else:
            worktree.parent.mkdir(parents=True, exist_ok=True)
            _git(user_repo, "worktree", "add", "-b", branch, str(worktree), head_sha)
            saved = {"session": session_id, "base_sha": head_sha, "candidates": {}, "created": time.time()}
        if user_repo.is_dirty(untracked_files=True):
            notes.append("Your uncommitted changes and untracked files are not in the worktree: it starts from your "
                         f"HEAD ({head_sha[:12]}).")
        repo = git.Repo(worktree)
        path = worktree / prefix if str(prefix) != "." else worktree
        if candidate_files is None:
            candidate_files = default_globs(project_rel(candidate_dir, project_root) if candidate_dir else "kernels")
        protected: list[str] = []
        if problem:
            try:
                protected.append(project_rel(problem, project_root))
            except WorkspaceError:
                pass  # a problem outside the project cannot be written from the worktree anyway
        created = float(saved.get("created") or 0.0)
        ws = cls(
            user_repo=user_repo, repo=repo, session_id=session_id, path=path, worktree_root=worktree,
            prefix=prefix, base_sha=saved.get("base_sha") or head_sha,
            rules=PathRules(candidate_files, protected), notes=notes,
            candidates={k: CandidateRecord(**v) for k, v in saved.get("candidates", {}).items()},
            problem=protected[0] if protected else str(saved.get("problem") or ""), created=created,
            project_root=project_root,
        )
        ws._save()
        return ws

    @property
    def branch(self) -> str:
        return f"kernelpilot/{self.session_id}"

    @property
    def candidate_files(self) -> list[str]:
        return self.rules.globs

    @staticmethod
    def _state_path(user_repo: Any, session_id: str) -> Path:
        return Path(user_repo.common_dir).resolve() / "kernelpilot" / "sessions" / f"{session_id}.json"

    def _save(self) -> None:
        state = self._state_path(self.user_repo, self.session_id)
        state.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "session": self.session_id, "base_sha": self.base_sha, "worktree": str(self.worktree_root),
            "project_root": str(self.project_root or ""), "problem": self.problem, "created": self.created,
            "branch": self.branch, "candidates": {k: vars(v) for k, v in self.candidates.items()},
        }
        tmp = state.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(state)

    # ---- guarded file access -------------------------------------------------------------------

    def _repo_rel(self, rel: PurePosixPath) -> str:
        return (self.prefix / rel).as_posix() if str(self.prefix) != "." else rel.as_posix()

    def _no_symlinks(self, rel: PurePosixPath) -> Path:
        current = self.path
        for part in rel.parts:
            current = current / part
            if current.is_symlink():
                target = os.readlink(current)
                inside = (current.parent / target).resolve().is_relative_to(self.worktree_root.resolve())
                where = "inside" if inside else "outside"
                raise GuardError(f"{rel.as_posix()} goes through the symlink {current.relative_to(self.path)} -> "
                                 f"{target} (pointing {where} the worktree); candidate paths may not contain symlinks.")
        return current

    def guard(self, rel_path: str | Path) -> Path:
        """The absolute worktree path for a candidate file, or GuardError saying why it is refused."""
        rel = self.rules.check(rel_path)
        return self._no_symlinks(rel)

    def write_file(self, rel: str | Path, text: str) -> Path:
        target = self.guard(rel)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._no_symlinks(normalize(rel))  # nothing was swapped in while creating the directories
            target.write_text(text, encoding="utf-8")
        except (NotADirectoryError, IsADirectoryError, FileExistsError) as exc:
            raise WorkspaceError(f"cannot write {normalize(rel).as_posix()}: {exc.strerror} ({exc.filename}); pick a "
                                 "file path that does not collide with an existing file or directory.") from None
        return target

    def read_file(self, rel: str | Path) -> str:
        """Any file inside the worktree may be read (no ``..``, no absolute paths, no symlinks out)."""
        clean = normalize(rel)
        target = (self.path / clean).resolve()
        if not target.is_relative_to(self.worktree_root.resolve()):
            raise GuardError(f"{clean.as_posix()} resolves outside the worktree; read only files of the project.")
        if not target.is_file():
            raise WorkspaceError(f"{clean.as_posix()} does not exist in the worktree; list the files to see what is "
                                 "there.")
        return target.read_text(encoding="utf-8", errors="replace")

    # ---- commits -------------------------------------------------------------------------------

    def _changed_candidate_paths(self) -> list[PurePosixPath]:
        out = _git(self.repo, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all")
        paths: list[PurePosixPath] = []
        for entry in _nul_list(out):
            repo_rel = PurePosixPath(entry[3:])
            if str(self.prefix) != "." and not repo_rel.is_relative_to(self.prefix):
                continue
            rel = repo_rel.relative_to(self.prefix) if str(self.prefix) != "." else repo_rel
            if self.rules.allows(rel) and not (self.path / rel).is_symlink():
                paths.append(rel)
        return paths

    def tree_with(self, repo: Any, parent: str, updates: dict[str, tuple[str, str] | None]) -> str:
        """A tree object: ``parent``'s tree with ``updates`` (path -> (mode, blob), or None to delete)."""
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            _git(repo, "read-tree", parent, env=env)
            lines = [f"{e[0]} {e[1]}\t{p}" if e else f"0 {'0' * 40}\t{p}" for p, e in updates.items()]
            if lines:
                _git(repo, "update-index", "-z", "--index-info", env=env, stdin=("\0".join(lines) + "\0").encode())
            return _git(repo, "write-tree", env=env)

    def checkpoint(self, candidate_id: str, message: str, verdict: Any = None) -> str:
        """Commit the current candidate files as ``candidate_id``; ``message`` should name its verdict, and
        ``verdict`` (when already known) is recorded as by ``record_verdict``."""
        if not candidate_id or not re.match(r"^[\w.-]+$", candidate_id):
            raise WorkspaceError(f"candidate id {candidate_id!r} must be letters, digits, '.', '_' or '-'.")
        head = _git(self.repo, "rev-parse", "HEAD")
        updates: dict[str, tuple[str, str] | None] = {}
        changed = self._changed_candidate_paths()
        for rel in changed:
            file = self.path / rel
            if file.is_file():
                blob = _git(self.repo, "hash-object", "-w", "--", self._repo_rel(rel))
                updates[self._repo_rel(rel)] = ("100755" if os.access(file, os.X_OK) else "100644", blob)
            else:
                updates[self._repo_rel(rel)] = None
        tree = self.tree_with(self.repo, head, updates)
        body = (f"kernelpilot {candidate_id}: {message.strip() or 'checkpoint'}\n\nKernelpilot-Candidate: "
                f"{candidate_id}\nKernelpilot-Session: {self.session_id}\n")
        sha = _git(self.repo, "commit-tree", tree, "-p", head, env=BOT_IDENTITY, stdin=body.encode())
        _git(self.repo, "update-ref", "-m", f"kernelpilot checkpoint {candidate_id}", f"refs/heads/{self.branch}", sha,
             head)
        if changed:
            _git(self.repo, "reset", "-q", sha, "--", *[self._repo_rel(p) for p in changed])
        self.candidates[candidate_id] = CandidateRecord(sha=sha, message=message)
        if verdict is not None:
            self.record_verdict(candidate_id, verdict)
        self._save()
        return sha

    def resolve(self, candidate: str) -> str:
        """The commit of a candidate id (or a commit sha of this session)."""
        if candidate in self.candidates:
            return self.candidates[candidate].sha
        found = _git(self.repo, "log", "--format=%H", "--fixed-strings", f"--grep=Kernelpilot-Candidate: {candidate}",
                     self.branch)
        for sha in found.splitlines():
            trailer = _git(self.repo, "log", "-1", "--format=%(trailers:key=Kernelpilot-Candidate,valueonly)", sha)
            if trailer.strip() == candidate:
                return sha
        if re.fullmatch(r"[0-9a-f]{7,40}", candidate):
            try:
                return _git(self.repo, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
            except WorkspaceError:
                pass
        known = ", ".join(self.candidates) or "none yet"
        raise WorkspaceError(f"unknown candidate {candidate!r} in session {self.session_id}; known candidates: "
                             f"{known}.")

    def diff(self, candidate: str, against: str = "original") -> str:
        """Unified diff of a candidate against ``original`` (session start), ``previous``, or another candidate."""
        sha = self.resolve(candidate)
        if against == "original":
            base = self.base_sha
        elif against == "previous":
            base = _git(self.repo, "rev-parse", f"{sha}^")
        else:
            base = self.resolve(against)
        return _git(self.repo, "diff", "--no-color", "--no-ext-diff", base, sha)

    def changed_files(self, candidate: str) -> list[str]:
        """Repository-relative paths the candidate changes relative to the session start."""
        return _nul_list(_git(self.repo, "diff", "--name-only", "-z", "--no-renames", self.base_sha,
                              self.resolve(candidate)))

    def record_verdict(self, candidate_id: str, verdict: Any) -> None:
        """Keep the candidate's last verdict (a dict or a Verdict): approval goes by it (approval_rule)."""
        check = check_approval(candidate_id, verdict)
        record = self.candidates.setdefault(candidate_id, CandidateRecord(sha=self.resolve(candidate_id), message=""))
        record.verdict, record.verdict_summary = check.status, check.summary
        self._save()

    def record_approval(self, candidate_id: str, commit: str, note: str = "") -> None:
        """Keep that the candidate landed as ``commit`` on the engineer's branch (``kernelpilot.landing.approve``
        lands it); ``note``: what the engineer should know about it (the drop-in operator written, or why not)."""
        if note:
            self.notes.append(note)
        record = self.candidates.setdefault(candidate_id, CandidateRecord(sha=self.resolve(candidate_id), message=""))
        record.status = "approved"
        record.approved_sha = commit
        self._save()

    def reject(self, candidate_id: str, reason: str) -> None:
        """Keep the candidate on the session branch, marked rejected with ``reason`` (JSON + git note)."""
        sha = self.resolve(candidate_id)
        _git(self.repo, "notes", f"--ref={NOTES_REF}", "add", "-f", "-m",
             f"rejected: {reason.strip() or 'no reason given'}", sha, env=BOT_IDENTITY)
        record = self.candidates.setdefault(candidate_id, CandidateRecord(sha=sha, message=""))
        record.status, record.reason = "rejected", reason
        self._save()

    def note(self, candidate_id: str) -> str:
        """The git note on a candidate's commit ("" if none)."""
        try:
            return _git(self.repo, "notes", f"--ref={NOTES_REF}", "show", self.resolve(candidate_id))
        except WorkspaceError:
            return ""

    def restore(self, candidate_id: str) -> None:
        """Make the worktree's candidate files exactly those of ``candidate_id`` (the branch is not moved)."""
        sha = self.resolve(candidate_id)
        listing = _nul_list(_git(self.repo, "ls-tree", "-r", "-z", "--name-only", sha))
        tracked = _nul_list(_git(self.repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"))

        def project_rel(repo_rel: str) -> PurePosixPath | None:
            p = PurePosixPath(repo_rel)
            if str(self.prefix) != ".":
                if not p.is_relative_to(self.prefix):
                    return None
                p = p.relative_to(self.prefix)
            return p if self.rules.allows(p) else None

        wanted = {r: p for r in listing if (p := project_rel(r)) is not None}
        for repo_rel in tracked:
            rel = project_rel(repo_rel)
            if rel is not None and repo_rel not in wanted and (self.path / rel).is_file():
                self.guard(rel).unlink()
        for repo_rel, rel in wanted.items():
            data = _git(self.repo, "cat-file", "blob", f"{sha}:{repo_rel}", raw=True)
            target = self.guard(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def cleanup(self, keep_branch: bool = True) -> None:
        """Remove the worktree; keep the branch (and the candidate map) unless ``keep_branch`` is False."""
        if self.worktree_root.exists():
            _git(self.user_repo, "worktree", "remove", "--force", str(self.worktree_root))
        _git(self.user_repo, "worktree", "prune")
        if not keep_branch:
            if _git(self.user_repo, "branch", "--list", self.branch):
                _git(self.user_repo, "branch", "-D", self.branch)
            self._state_path(self.user_repo, self.session_id).unlink(missing_ok=True)
