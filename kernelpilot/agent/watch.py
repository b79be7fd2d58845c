"""Manual pairing without a model: re-evaluate the candidate each time the engineer saves a file.

``watch(paths)`` polls (mtime and size first, then a content hash, so touching a file without
changing it does nothing; no new dependency) and yields the set of changed files once the writes
have settled. The TUI reuses it; ``kernelpilot run PROBLEM --watch`` prints a verdict per save.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, TextIO

from kernelpilot.agent.events import CandidateEvaluated
from kernelpilot.agent.factory import make_evaluator
from kernelpilot.agent.verdict_text import verdict_for_model
from kernelpilot.problem import load_problem

WATCHED_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".py")


def _files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out += [f for f in sorted(p.rglob("*")) if f.is_file() and f.suffix in WATCHED_SUFFIXES
                    and "__pycache__" not in f.parts and not f.name.startswith(".")]
        elif p.is_file():
            out.append(p)
    return out


def _scan(paths: Iterable[Path], previous: dict[Path, tuple[int, int, str]]) -> dict[Path, tuple[int, int, str]]:
    snap: dict[Path, tuple[int, int, str]] = {}
    for f in _files(paths):
        try:
            st = f.stat()
        except OSError:
            continue
        old = previous.get(f)
        if old is not None and old[0] == st.st_mtime_ns and old[1] == st.st_size:
            snap[f] = old
            continue
        try:
            digest = hashlib.sha256(f.read_bytes()).hexdigest()
        except OSError:
            continue
        snap[f] = (st.st_mtime_ns, st.st_size, digest)
    return snap


def _changed(a: dict[Path, tuple[int, int, str]], b: dict[Path, tuple[int, int, str]]) -> set[Path]:
    return {p for p in a.keys() | b.keys() if (a.get(p) or (0, 0, ""))[2] != (b.get(p) or (0, 0, ""))[2]}


async def watch(paths: Iterable[Path], interval_s: float = 0.5, settle_s: float = 0.2) -> AsyncIterator[set[Path]]:
    """Yield the set of changed files (content changed, created or deleted) under ``paths``, forever."""
    paths = [Path(p) for p in paths]
    snapshot = await asyncio.to_thread(_scan, paths, {})
    while True:
        await asyncio.sleep(interval_s)
        current = await asyncio.to_thread(_scan, paths, snapshot)
        changed = _changed(snapshot, current)
        if not changed:
            snapshot = current
            continue
        for _ in range(10):  # let an editor's burst of writes settle
            await asyncio.sleep(settle_s)
            later = await asyncio.to_thread(_scan, paths, current)
            if not _changed(current, later):
                break
            changed |= _changed(current, later)
            current = later
        snapshot = current
        yield changed


async def watch_loop(problem: Any, candidate: Path, evaluator: Any, out: TextIO, *, jsonl: bool = False,
                     interval_s: float = 0.5, max_evaluations: int | None = None) -> int:
    count = 0

    async def evaluate(reason: str) -> None:
        nonlocal count
        count += 1
        if not jsonl:
            out.write(f"\n== evaluation {count} ({reason}) ==\n")
            out.flush()
        if hasattr(evaluator, "evaluate_async"):
            verdict = await evaluator.evaluate_async(problem, candidate, mode="benchmark")
        else:
            verdict = await asyncio.to_thread(evaluator.evaluate, problem, candidate, mode="benchmark")
        if jsonl:
            ev = CandidateEvaluated(candidate_id=f"manual-{count}", verdict=verdict.to_dict(), source="engineer")
            out.write(json.dumps(ev.to_dict(), default=str) + "\n")
        else:
            out.write(verdict_for_model(verdict) + "\n")
        out.flush()

    if not jsonl:
        out.write(f"watching {candidate} (save a file to re-evaluate; Ctrl-C to stop)\n")
        out.flush()
    if (candidate / "model_new.py").is_file() or candidate.is_file():
        await evaluate("start")
    async for changed in watch([candidate], interval_s=interval_s):
        if max_evaluations is not None and count >= max_evaluations:
            break
        names = ", ".join(sorted(p.name for p in changed))
        await evaluate(f"changed: {names}")
        if max_evaluations is not None and count >= max_evaluations:
            break
    return 0


def watch_command(args: Any, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    config = args.config
    problem = load_problem(args.problem)
    candidate = Path(getattr(args, "candidate", None) or config.candidate_dir)
    evaluator = make_evaluator(config)
    try:
        return asyncio.run(watch_loop(problem, candidate, evaluator, out, jsonl=bool(getattr(args, "jsonl", False))))
    except KeyboardInterrupt:
        return 0
    finally:
        closer = getattr(evaluator, "close", None)
        if callable(closer):
            closer()
