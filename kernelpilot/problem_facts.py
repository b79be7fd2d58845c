"""The problem card's facts (shapes, dtypes, bytes moved, FLOPs) kept on this machine between sessions.

Analysing a problem imports torch and runs it on the meta device: seconds before the first screen can
show anything. The answer depends only on the problem file's bytes and torch's version, so it is kept in
one small JSON file per problem under the user cache (``problem-facts/``) and read at launch without torch.
A file that cannot be read or written is no error: the card then waits for the analysis.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kernelpilot.problem import ProblemInfo

FORMAT = 1


def _folder() -> Path:
    if os.environ.get("KERNELPILOT_FACTS_CACHE"):
        return Path(os.environ["KERNELPILOT_FACTS_CACHE"])
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "problem-facts"


def _key(problem: Path) -> str | None:
    try:
        data = Path(problem).read_bytes()
    except OSError:
        return None
    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = ""
    return hashlib.sha256(data + f"\0torch={torch}\0format={FORMAT}".encode()).hexdigest()[:24]


def lookup(problem: Path) -> ProblemInfo | None:
    """The facts of this exact problem file, as an earlier analysis with this torch found them."""
    key = _key(problem)
    if key is None:
        return None
    try:
        return ProblemInfo.from_dict(json.loads((_folder() / f"{key}.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def store(problem: Path, info: ProblemInfo) -> None:
    key = _key(problem)
    if key is None:
        return
    folder = _folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".facts-")
        with os.fdopen(fd, "w") as fh:
            json.dump(info.to_dict(), fh)
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass
