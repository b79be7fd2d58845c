"""What the converters of published KernelBench solution sets share (benchmarks/kb_leaderboard.py,
benchmarks/cuda_l1.py): reading a fetched repository (a git directory, as the fetch tool mirrors it, or a plain
work tree) and writing the layout ``kernelpilot suite --solutions ... --claims ...`` and
``benchmarks/rescore_gpu.py --published NAME=DIR`` read:

- ``OUT/KernelBench/level<L>/<stem>.py``: the problem files the solutions were scored against;
- ``OUT/generations/level_<L>_problem_<ID>_sample_<S>_kernel.py``: the solutions;
- ``OUT/claims.csv``: the published speedups over eager and torch.compile, with the GPU they were measured on;
- ``OUT/manifest.json``: where the set came from and, per generation, its problem, origin and claims.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

CLAIM_FIELDS = ["problem", "sample", "claimed_x_eager", "claimed_x_compile", "gpu"]
LAYOUT = ("manifest.json", "claims.csv", "generations", "KernelBench")  # what a folder of a published set holds


class Source:
    """Files of a fetched repository, from its git directory or a plain folder; ``marker`` is a file the set must
    have (checked at once, so a wrong path stops with a message rather than an empty set)."""

    def __init__(self, path: Path, marker: str) -> None:
        self.path = path
        self.git = (path / "HEAD").is_file() and (path / "objects").is_dir()
        if self.read(marker) is None:
            sys.exit(f"{path} is neither a git directory nor a work tree holding {marker}")

    def read(self, name: str) -> bytes | None:
        if not self.git:
            p = self.path / name
            return p.read_bytes() if p.is_file() else None
        r = subprocess.run(["git", "--git-dir", str(self.path), "show", f"HEAD:{name}"], capture_output=True)
        return r.stdout if r.returncode == 0 else None

    def commit(self) -> str:
        if not self.git:
            return ""
        r = subprocess.run(["git", "--git-dir", str(self.path), "rev-parse", "HEAD"], capture_output=True, text=True)
        return r.stdout.strip()


def figure(value: object) -> str:
    """A claimed ratio as the claims file wants it; empty when there is none (or not a positive number)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return repr(v) if v > 0 else ""


def generation_name(level: int, pid: int, sample: int) -> str:
    return f"level_{level}_problem_{pid}_sample_{sample}_kernel.py"


def write_problem(out: Path, level: int, stem: str, text: bytes) -> None:
    folder = out / "KernelBench" / f"level{level}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.py").write_bytes(text)


def write_generation(out: Path, level: int, pid: int, sample: int, code: str) -> str:
    folder = out / "generations"
    folder.mkdir(parents=True, exist_ok=True)
    name = generation_name(level, pid, sample)
    (folder / name).write_text(code, encoding="utf-8")
    return name


def finish(out: Path, claims: list[dict], doc: dict) -> dict:
    """claims.csv (a header even when nothing was claimed) and manifest.json; returns ``doc``."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "claims.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CLAIM_FIELDS)
        w.writeheader()
        w.writerows(claims)
    (out / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


def describe(doc: dict, out: Path) -> str:
    n = len(doc["generations"])
    problems = len({e["problem"] for e in doc["generations"]})
    skipped = doc.get("skipped") or []
    return (f"{n} generations for {problems} problems in {out / 'generations'}; problems in {out / 'KernelBench'}; "
            f"claims in {out / 'claims.csv'}" + (f"; {len(skipped)} skipped (manifest.json says why)" if skipped else ""))
