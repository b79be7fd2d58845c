"""File operations behind the agent's tools: reads confined to the worktree, atomic writes."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kernelpilot.errors import GuardError

SKIP_DIRS = {".git", "__pycache__", ".ninja_deps", "build", ".pytest_cache", ".venv", "node_modules"}
MAX_READ_LINES = 400
MAX_READ_CHARS = 40_000


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader (or a cancel) sees the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".kp-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def resolve_readable(root: Path, rel: str) -> Path:
    """``rel`` inside the worktree ``root`` (no escape by ``..``, absolute paths or symlinks; no .git)."""
    if not rel or rel.strip() in (".", "./"):
        return root.resolve()
    candidate = Path(rel)
    if candidate.is_absolute():
        raise GuardError(f"{rel} is an absolute path; give a path relative to the worktree root.")
    resolved = (root / candidate).resolve()
    base = root.resolve()
    if resolved != base and base not in resolved.parents:
        raise GuardError(f"{rel} is outside the worktree; give a path inside it.")
    if ".git" in resolved.relative_to(base).parts:
        raise GuardError(f"{rel} is inside .git; the repository internals are not readable by tools.")
    return resolved


def walk_files(root: Path, start: Path) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".kp"))
        for name in sorted(filenames):
            if name.endswith(".kp-tmp") or name.endswith((".so", ".o", ".pyc")):
                continue
            yield Path(dirpath) / name


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path.name} is a binary file")
    return data.decode("utf-8", errors="replace")


def numbered(text: str, start: int = 1, end: int | None = None) -> tuple[str, int, int, int]:
    """Lines ``start..end`` (1-based, inclusive) numbered; returns (text, first, last, total)."""
    lines = text.splitlines()
    total = len(lines)
    first = max(1, start)
    last = total if end is None else min(total, end)
    last = min(last, first + MAX_READ_LINES - 1)
    out: list[str] = []
    size = 0
    for i in range(first, last + 1):
        line = f"{i:>5}  {lines[i - 1]}"
        size += len(line) + 1
        if size > MAX_READ_CHARS:
            last = i - 1
            break
        out.append(line)
    return "\n".join(out), first, last, total


def grep(root: Path, start: Path, pattern: str, glob: str | None, max_results: int) -> tuple[list[str], int]:
    regex = re.compile(pattern)
    hits: list[str] = []
    count = 0
    for path in walk_files(root, start):
        if glob and not path.match(glob):
            continue
        try:
            if path.stat().st_size > 2_000_000:
                continue
            text = read_text(path)
        except (OSError, ValueError):
            continue
        rel = path.relative_to(root.resolve()) if path.is_absolute() else path
        for lineno, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                count += 1
                if len(hits) < max_results:
                    hits.append(f"{rel}:{lineno}: {line.strip()[:200]}")
    return hits, count


def tree_hash(directory: Path) -> str:
    """A hash of every source file in ``directory`` (names and bytes), for "are these the files we measured?"."""
    h = hashlib.sha256()
    if directory.is_dir():
        for path in walk_files(directory, directory):
            h.update(str(path.relative_to(directory)).encode() + b"\0")
            try:
                h.update(path.read_bytes())
            except OSError:
                continue
            h.update(b"\0")
    return h.hexdigest()


def edit_text(text: str, search: str, replace: str, where: str) -> str:
    """Replace the single exact occurrence of ``search``; ValueError with a useful message otherwise."""
    if not search:
        raise ValueError("search is empty; give the exact text to replace (use write_file to create a file)")
    count = text.count(search)
    if count == 0:
        hint = _closest_line(text, search)
        raise ValueError(
            f"the search text was not found in {where}; copy it exactly from read_file output "
            f"(without line numbers){hint}"
        )
    if count > 1:
        raise ValueError(
            f"the search text matches {count} times in {where}; include more surrounding lines so it matches exactly "
            "once"
        )
    return text.replace(search, replace, 1)


def _closest_line(text: str, search: str) -> str:
    import difflib

    first = next((ln for ln in search.splitlines() if ln.strip()), "")
    if not first:
        return ""
    lines = text.splitlines()
    close = difflib.get_close_matches(first, lines, n=1, cutoff=0.6)
    if not close:
        return ""
    lineno = lines.index(close[0]) + 1
    return f"; the closest line is {lineno}: {close[0].strip()[:160]!r}"
