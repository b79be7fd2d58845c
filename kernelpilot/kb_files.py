"""Which KernelBench commit a problem file comes from, by its git blob id (no git, no network).

``kernelpilot/data/kernelbench_files.json`` (written by benchmarks/kb_manifest.py from a clone of
ScalingIntelligence/KernelBench) holds the blob id of every level 1-3 problem file at three commits:

- ``current``: main at the commit the ``kernelbench`` preset follows (rules.KERNELBENCH_MAIN);
- ``v0.1``: the head of branch v0.1 (rules.KERNELBENCH_V01), the harness of the ``kernelbench-v0.1``
  preset. Its problem files are already the scaled-up sizes of July 2025 (b08d959, 76b487e): only 3 of
  250 differ from current's;
- ``original``: main before the v0.1 branch was merged (ORIGINAL_COMMIT, 2025-07-04): the problem sizes
  of the paper and of the generations published before July 2025 (softmax 16 x 16384, not 4096 x 393216),
  scored by the same harness as v0.1.

A re-score is faithful only on the problem files the scored generations were written for, so the suite and
``eval`` say which commit the given files match and, where a preset's files differ, which commit to check
out. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

ORIGINAL_COMMIT = "6500bbc"  # main, 2025-07-04: the last commit with the original problem sizes
MANIFEST = Path(__file__).with_name("data") / "kernelbench_files.json"
# what each preset's harness was run on when its scores were published
PRESET_FILES = {"current": ("current",), "v0.1": ("original", "v0.1")}


def blob_id(data: bytes) -> str:
    """git's object id of a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@lru_cache(maxsize=1)
def manifest() -> dict[str, dict[str, Any]]:
    try:
        return dict(json.loads(MANIFEST.read_text())["commits"])
    except (OSError, ValueError, KeyError):
        return {}


def problem_key(path: Path) -> str | None:
    """``level1/23_Softmax`` for a file under a ``level1/`` folder, else None."""
    parent = path.parent.name
    return f"{parent}/{path.stem}" if parent in ("level1", "level2", "level3") and path.suffix == ".py" else None


def matching_commits(path: Path) -> list[str] | None:
    """The manifest's commits (current, v0.1, original) whose file of this key has these bytes; None when
    the file is not a KernelBench problem by its path."""
    key = problem_key(path)
    if key is None:
        return None
    try:
        oid = blob_id(path.read_bytes())
    except OSError:
        return None
    return [name for name, c in manifest().items() if c.get("files", {}).get(key) == oid]


def check(paths: list[Path], preset: str | None) -> dict[str, Any]:
    """What the problem files are, for a run under ``preset`` (a KernelBenchHarness version, or None):
    counts per commit and a warning naming the commit to check out when the files are not the ones the
    preset's published scores were measured on."""
    counts: dict[str, int] = {}
    unknown: list[str] = []
    kb = 0
    for p in paths:
        found = matching_commits(Path(p))
        if found is None:
            continue
        kb += 1
        for name in found:
            counts[name] = counts.get(name, 0) + 1
        if not found:
            unknown.append(problem_key(Path(p)) or str(p))
    out: dict[str, Any] = {"kernelbench_files": kb, "matches": counts, "unknown": unknown[:20],
                           "unknown_count": len(unknown), "warning": None}
    if not kb or preset not in PRESET_FILES:
        return out
    wanted = PRESET_FILES[preset]
    commits = manifest()
    best = max(wanted, key=lambda n: counts.get(n, 0))
    if counts.get(best, 0) == kb:
        return out
    name_of = {"current": commits.get("current", {}).get("commit", "?"),
               "v0.1": commits.get("v0.1", {}).get("commit", "?"),
               "original": commits.get("original", {}).get("commit", ORIGINAL_COMMIT)}
    have = max(counts, key=lambda n: counts[n]) if counts else None
    what = (f"{counts[have]} of {kb} problem files are KernelBench's at {have} ({name_of[have]})" if have
            else f"none of the {kb} problem files is KernelBench's at a known commit")
    if preset == "v0.1":
        advice = (f"generations scored with KernelBench v0.1's harness were written for the original problem sizes: "
                  f"check out {name_of['original']} (`git checkout {name_of['original']} -- KernelBench/`) for a "
                  f"faithful v0.1 re-score, or {name_of['v0.1']} for v0.1's own branch")
    else:
        advice = f"the current harness scores today's files: check out {name_of['current']} for a faithful re-score"
    out["warning"] = f"{what}; {advice}."
    if unknown:
        out["warning"] += f" Changed locally: {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}."
    return out
