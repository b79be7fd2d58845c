"""Turn a published set of model-written KernelBench solutions, the KernelBench leaderboard
("Kernelsseum", github.com/anneouyang/KernelBenchLeaderboard, scored on an NVIDIA L40S with KernelBench's
original harness), into what ``kernelpilot suite --solutions ... --claims ...`` reads:

- ``OUT/KernelBench/level<L>/<name>.py``: the problem files the solutions were scored against, as the
  leaderboard publishes them (248 of its 250 are KernelBench's files at 6500bbc byte for byte; the suite's
  ``kernelbench-v0.1`` preset names the two that differ);
- ``OUT/generations/level_<L>_problem_<ID>_sample_<S>_kernel.py``: every published solution, samples of a
  problem numbered by model name then file id (sample 0 is no model's first try: the leaderboard publishes
  each model's best, so "sample 0" figures are one model's, "best of k" is the leaderboard's);
- ``OUT/claims.csv``: the leaderboard's speedups over eager and over torch.compile, the GPU they were
  measured on;
- ``OUT/manifest.json``: per generation, the model, the leaderboard's file id and its claims.

The leaderboard is never committed; fetch it and point ``--leaderboard`` at its git directory or a work tree:

  python benchmarks/kb_leaderboard.py --leaderboard /work/.mirror/anneouyang+KernelBenchLeaderboard/repo --out /tmp/lb
  kernelpilot suite /tmp/lb/KernelBench --solutions /tmp/lb/generations --rules kernelbench-v0.1 \\
      --claims /tmp/lb/claims.csv --out runs/leaderboard
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from published import Source, describe, figure, finish, write_generation, write_problem  # noqa: E402

RAW = "docs/assets/raw_data.json"  # every solution: level, problem_id, code, model, claimed figures
NAMES = "docs/assets/data.json"  # "Level 1: 19_ReLU" -> the problem's file name
PROBLEM = "docs/assets/problems/l{level}_p{pid}.py"
GPU = "NVIDIA L40S"  # the leaderboard's title: "KernelBench Top Solutions Per Problem (Nvidia L40S GPU)"
_KEY = re.compile(r"Level (\d+): ((\d+)_.*)$")


def problem_names(src: Source) -> tuple[dict[tuple[int, int], str], dict[str, tuple[int, int]]]:
    """(level, id) -> the problem's file stem (``19_ReLU``), and solution file id -> (level, id), from the
    leaderboard's table (which lists each problem's five best solutions)."""
    raw = src.read(NAMES)
    if raw is None:
        sys.exit(f"the leaderboard has no {NAMES}")
    names: dict[tuple[int, int], str] = {}
    of_file: dict[str, tuple[int, int]] = {}
    for key, ranked in json.loads(raw).items():
        m = _KEY.match(key)
        if m:
            names[(int(m.group(1)), int(m.group(3)))] = m.group(2)
            of_file.update({str(e["file"]): (int(m.group(1)), int(m.group(3))) for e in ranked})
    return names, of_file


def id_offset(solutions: list[dict], of_file: dict[str, tuple[int, int]]) -> int:
    """What to add to raw_data's ``problem_id`` to get KernelBench's problem number: raw_data counts from 0
    (its layernorm solution has problem_id 39, KernelBench's 40_LayerNorm). Taken from the solutions the
    table also lists, and required to be the same for all of them."""
    seen = {of_file[s["file"]][1] - int(s["problem_id"]) for s in solutions if s.get("file") in of_file}
    if len(seen) != 1:
        sys.exit(f"raw_data's problem ids do not map to the table's problems by one offset (offsets seen: {sorted(seen)})")
    return seen.pop()


def write(src: Source, out: Path, levels: list[int], models: list[str]) -> dict:
    raw = src.read(RAW)
    if raw is None:
        sys.exit(f"the leaderboard has no {RAW}")
    solutions = [s for s in json.loads(raw) if int(s["level"]) in levels
                 and (not models or s.get("display_name") in models or s.get("model") in models)]
    names, of_file = problem_names(src)
    offset = id_offset(solutions, of_file)
    by_problem: dict[tuple[int, int], list[dict]] = {}
    skipped = []
    for s in solutions:
        key = of_file.get(str(s.get("file"))) or (int(s["level"]), int(s["problem_id"]) + offset)
        if key not in names:
            skipped.append({"file": s.get("file"), "why": f"level {key[0]} problem {key[1]} is not in {NAMES}"})
            continue
        by_problem.setdefault(key, []).append(s)
    entries = []
    claims = []
    for (level, pid), group in sorted(by_problem.items()):
        stem = names[(level, pid)]
        text = src.read(PROBLEM.format(level=level, pid=pid))
        if text is None:
            skipped.extend({"file": s.get("file"), "why": f"the leaderboard has no problem file for {stem}"} for s in group)
            continue
        write_problem(out, level, stem, text)
        for sample, s in enumerate(sorted(group, key=lambda s: (str(s.get("display_name")), str(s.get("file"))))):
            name = write_generation(out, level, pid, sample, s["code"])
            eager, compiled = figure(s.get("torch_speedup")), figure(s.get("torch_compile_speedup"))
            entries.append({"generation": name, "problem": f"level{level}/{stem}", "sample": sample,
                            "model": s.get("display_name") or s.get("model"), "leaderboard_file": s.get("file"),
                            "claimed_x_eager": eager or None, "claimed_x_compile": compiled or None})
            if eager or compiled:
                claims.append({"problem": f"level{level}/{stem}", "sample": sample, "claimed_x_eager": eager,
                               "claimed_x_compile": compiled, "gpu": GPU})
    doc = {"about": "model-written KernelBench solutions published by the KernelBench leaderboard (Kernelsseum), "
                    "written by benchmarks/kb_leaderboard.py; claims measured there on " + GPU,
           "source": "https://github.com/anneouyang/KernelBenchLeaderboard", "commit": src.commit(),
           "generations": entries, "skipped": skipped}
    finish(out, claims, doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--leaderboard", required=True, help="the leaderboard's git directory or a work tree")
    p.add_argument("--out", required=True, help="folder to write KernelBench/, generations/, claims.csv, manifest.json")
    p.add_argument("--levels", default="1,2,3", help="comma-separated levels to keep (default 1,2,3)")
    p.add_argument("--models", default="", help="comma-separated model names to keep (default: all)")
    args = p.parse_args(argv)
    out = Path(args.out).expanduser()
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    doc = write(Source(Path(args.leaderboard).expanduser().resolve(), RAW), out, levels, models)
    print(describe(doc, out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
