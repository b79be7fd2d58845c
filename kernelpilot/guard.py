"""Which paths the agent may write in a workspace: candidate files only.

Pure path rules (no git): relative, no ``..``, not the problem file, not tests, not the harness or
project config, and matching one of the candidate globs. ``Workspace.guard`` adds the on-disk
checks (no symlinks anywhere along the path).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from kernelpilot.errors import GuardError

CANDIDATE_SUFFIXES = ("cu", "cuh", "cpp", "h", "py")
PROTECTED_NAMES = frozenset({"kernelpilot.toml", "pyproject.toml", "setup.py", "setup.cfg", "conftest.py"})
PROTECTED_DIRS = frozenset({".git", ".kernelpilot", ".github", ".ci", "tests", "test"})


def default_globs(candidate_dir: str | PurePosixPath) -> list[str]:
    """``<candidate_dir>/**/*.cu`` and so on for every candidate suffix."""
    base = PurePosixPath(candidate_dir).as_posix().strip("/") or "."
    return [f"{base}/**/*.{suffix}" if base != "." else f"**/*.{suffix}" for suffix in CANDIDATE_SUFFIXES]


def glob_match(pattern: str, rel: str) -> bool:
    """Segment-wise glob: ``*`` stays within one directory, ``**`` spans zero or more."""
    return _match(PurePosixPath(pattern).parts, PurePosixPath(rel).parts)


def _match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _match(rest, parts[1:])


def normalize(rel: str | Path) -> PurePosixPath:
    """A clean relative POSIX path, or GuardError for absolute paths, ``..`` and the like."""
    text = str(rel)
    if not text.strip():
        raise GuardError("an empty path was given; name a candidate file relative to the project.")
    if "\\" in text or "\0" in text:
        raise GuardError(f"path {text!r} contains a backslash or NUL; use a plain relative path with forward slashes.")
    if text.startswith(("/", "~")) or PurePosixPath(text).is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise GuardError(f"path {text!r} is absolute; give paths relative to the project, inside the candidate "
                         "directory.")
    parts = [p for p in PurePosixPath(text).parts if p != "."]
    if ".." in parts:
        raise GuardError(f"path {text!r} climbs out with '..'; write only inside the candidate directory.")
    if not parts:
        raise GuardError(f"path {text!r} names the project root, not a file; name a candidate file.")
    return PurePosixPath(*parts)


class PathRules:
    """The static write rules of one workspace (paths relative to the project root)."""

    def __init__(self, globs: Iterable[str], protected: Iterable[str] = ()) -> None:
        self.globs = list(globs)
        self.protected = {normalize(p).as_posix() for p in protected}

    def check(self, rel: str | Path) -> PurePosixPath:
        """The normalized path if the agent may write it; GuardError saying why not otherwise."""
        path = normalize(rel)
        text = path.as_posix()
        if text in self.protected:
            raise GuardError(f"{text} is the problem file (the reference the candidate is checked against); it cannot "
                             "be edited from a session.")
        for part in path.parts[:-1]:
            if part in PROTECTED_DIRS:
                raise GuardError(f"{text} is inside {part}/, which holds tests or tooling; write only candidate files.")
        name = path.name
        if name in PROTECTED_NAMES or name.startswith("test_") and name.endswith(".py") or name.endswith("_test.py"):
            raise GuardError(f"{text} is a test or project configuration file; write only candidate files.")
        if path.parts[0] == "kernelpilot":
            raise GuardError(f"{text} is part of the kernelpilot harness; write only candidate files.")
        if not any(glob_match(g, text) for g in self.globs):
            raise GuardError(f"{text} is not a candidate file; the agent may write only {', '.join(self.globs)}.")
        return path

    def allows(self, rel: str | Path) -> bool:
        try:
            self.check(rel)
        except GuardError:
            return False
        return True
