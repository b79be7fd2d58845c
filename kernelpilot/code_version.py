"""Which version of kernelpilot's code is running: the git tree of ``kernelpilot/`` (so documentation and evidence
commits do not count) and whether it has uncommitted changes; outside a git checkout (an installed wheel), a digest
of the package's own files. A suite run records it with every verdict, and a resume under another version refuses
unless asked to mix them."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_SOURCE_SUFFIXES = (".py", ".h", ".cuh", ".cu", ".cpp", ".json", ".tcss")


@dataclass(frozen=True)
class CodeVersion:
    tree: str  # git's tree id of kernelpilot/ at HEAD, or "files:<digest>" outside a checkout
    dirty: bool  # uncommitted changes under kernelpilot/ (then the tree alone does not name the code)
    commit: str = ""  # HEAD's commit, when known (informative: the tree is what is compared)

    @property
    def key(self) -> str:
        """What a run stores and compares: the tree, marked when the code had uncommitted changes."""
        return f"{self.tree}{'+dirty' if self.dirty else ''}"

    @property
    def label(self) -> str:
        return f"{self.tree[:12]}{' (dirty)' if self.dirty else ''}"

    def to_dict(self) -> dict[str, object]:
        return {"tree": self.tree, "dirty": self.dirty, "commit": self.commit}


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def files_digest(package: Path = PACKAGE) -> str:
    """A digest of the package's source files (names and bytes), for code outside a git checkout."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return "files:" + digest.hexdigest()[:20]


def code_version(package: Path = PACKAGE) -> CodeVersion:
    """The version of the code in ``package`` (kernelpilot itself by default)."""
    top = _git(["rev-parse", "--show-toplevel"], package)
    if top is None:
        return CodeVersion(files_digest(package), False)
    relative = package.resolve().relative_to(Path(top).resolve()).as_posix()
    tree = _git(["rev-parse", f"HEAD:{relative}"], package)
    if not tree:  # a checkout with no commit of the package yet
        return CodeVersion(files_digest(package), True)
    status = _git(["status", "--porcelain", "--", "."], package)
    commit = _git(["rev-parse", "HEAD"], package) or ""
    return CodeVersion(tree, bool(status), commit)


@lru_cache(maxsize=1)
def running_version() -> CodeVersion:
    """This process's code version (read once: the files do not change under a running suite)."""
    return code_version()
