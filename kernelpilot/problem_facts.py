"""The problem card's facts (shapes, dtypes, bytes moved, FLOPs) kept on this machine between sessions.

Analysing a problem imports torch and runs it on the meta device: seconds before the first screen can
show anything. The answer depends only on the problem file's bytes and torch's version (the meta device is
the same on every machine), so it is kept in one small JSON file per problem in ``problem-facts/`` beside the
machine's cached baselines (``baselines.sqlite`` under the user cache, or beside the file
``KERNELPILOT_BASELINES_CACHE`` names; ``KERNELPILOT_FACTS_CACHE`` names another folder), and read at launch
without torch. ``analyse_apart`` computes and stores them in a process of its own
(``python -m kernelpilot.problem_facts PROBLEM``), so the caller never imports torch. A file that cannot be
read or written is no error: the card then waits for the analysis.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kernelpilot.problem import ProblemInfo

FORMAT = 1
FACTS_ENV = "KERNELPILOT_FACTS_CACHE"
BASELINES_ENV = "KERNELPILOT_BASELINES_CACHE"  # machine_cache.ENV: the facts live in the same folder
ANALYSIS_TIMEOUT_S = 300.0


def folder() -> Path:
    """Where the facts are kept: beside the machine's cached baselines."""
    if os.environ.get(FACTS_ENV, "").strip():
        return Path(os.environ[FACTS_ENV]).expanduser()
    baselines = os.environ.get(BASELINES_ENV, "").strip()
    if baselines:
        return Path(baselines).expanduser().parent / "problem-facts"
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "problem-facts"


def torch_version() -> str:
    """The installed torch's version, without importing it ("" without torch)."""
    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def key(problem: Path) -> str | None:
    """The cache key: the problem file's bytes, torch's version and this format (None: unreadable file)."""
    try:
        data = Path(problem).read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data + f"\0torch={torch_version()}\0format={FORMAT}".encode()).hexdigest()[:24]


def lookup(problem: Path) -> ProblemInfo | None:
    """The facts of this exact problem file, as an earlier analysis with this torch found them."""
    found = key(problem)
    if found is None:
        return None
    try:
        return ProblemInfo.from_dict(json.loads((folder() / f"{found}.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def store(problem: Path, info: ProblemInfo) -> None:
    found = key(problem)
    if found is None:
        return
    where = folder()
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".facts-")
        with os.fdopen(fd, "w") as fh:
            json.dump(info.to_dict(), fh)
        os.replace(tmp, where / f"{found}.json")
    except OSError:
        pass


def child_env() -> dict[str, str] | None:
    """The analysis process's environment: this one's, and where this process reads a bytecode cache of its own
    (evaluation/sandbox/bytecode.py, where torch has no bytecode), that cache, read-only: the card's facts imported
    torch from source otherwise (11.2 s on an H100, 2026-12-07, in a launcher whose workers read the cache)."""
    if not sys.pycache_prefix:
        return None
    return {**os.environ, "PYTHONPYCACHEPREFIX": sys.pycache_prefix, "PYTHONDONTWRITEBYTECODE": "1"}


def analyse_apart(problem: Path, timeout: float = ANALYSIS_TIMEOUT_S) -> tuple[ProblemInfo | None, str]:
    """(the facts, "") from the cache or from an analysis in a process of its own (which stores them), else
    (None, why). Blocks: call it from a worker thread; this process imports no torch."""
    known = lookup(problem)
    if known is not None:
        return known, ""
    try:
        done = subprocess.run([sys.executable, "-m", "kernelpilot.problem_facts", str(problem)],
                              capture_output=True, text=True, timeout=timeout, env=child_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"the analysis did not finish ({exc})"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    try:
        answer = json.loads(lines[-1])
        if answer.get("info") is not None:
            return ProblemInfo.from_dict(answer["info"]), ""
        return None, str(answer.get("error") or "the analysis gave no answer")
    except (IndexError, ValueError, TypeError, KeyError):
        tail = (done.stderr or done.stdout).strip().splitlines()
        return None, tail[-1] if tail else f"the analysis exited with {done.returncode}"


def main(argv: list[str]) -> int:
    """``python -m kernelpilot.problem_facts PROBLEM``: analyse on the meta device, store, print JSON."""
    from kernelpilot.problem import analyse, load_problem

    try:
        problem = load_problem(argv[0])
        info = analyse(problem, device="meta")
    except Exception as err:  # noqa: BLE001 - a problem the engine will also refuse: the card says why
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(json.dumps({"error": text}), flush=True)
        return 1
    store(problem.path, info)
    print(json.dumps({"info": info.to_dict()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
