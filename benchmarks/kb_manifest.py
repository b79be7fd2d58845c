"""Write kernelpilot/data/kernelbench_files.json: the git blob id of every level 1-3 problem file at the
KernelBench commits our presets follow (kernelpilot.rules: KERNELBENCH_MAIN, KERNELBENCH_V01)
and the last commit with the original problem sizes (kernelpilot.kb_files.ORIGINAL_COMMIT).

    python benchmarks/kb_manifest.py --repo /path/to/KernelBench.git [--out kernelpilot/data/kernelbench_files.json]

The repository is a clone of ScalingIntelligence/KernelBench (bare is fine: this reads `git ls-tree`).
kernelpilot.kb_files compares a user's problem files with these ids, so a v0.1 re-score of today's
problem sizes is said, with the commit to check out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelpilot.kb_files import ORIGINAL_COMMIT  # noqa: E402
from kernelpilot.rules import KERNELBENCH_MAIN, KERNELBENCH_V01  # noqa: E402


def blobs(repo: Path, commit: str) -> dict[str, str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", commit, "KernelBench/"], capture_output=True,
                         text=True, check=True).stdout
    files: dict[str, str] = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        parts = path.split("/")
        if len(parts) == 3 and parts[1] in ("level1", "level2", "level3") and parts[2].endswith(".py"):
            files[f"{parts[1]}/{parts[2][:-3]}"] = meta.split()[2]
    return dict(sorted(files.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "kernelpilot" / "data" / "kernelbench_files.json")
    args = ap.parse_args()
    data = {"source": "https://github.com/ScalingIntelligence/KernelBench",
            "commits": {name: {"commit": commit, "files": blobs(args.repo, commit)}
                        for name, commit in (("current", KERNELBENCH_MAIN), ("v0.1", KERNELBENCH_V01),
                                                   ("original", ORIGINAL_COMMIT))}}
    args.out.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n")
    print(f"wrote {args.out}: " + ", ".join(f"{k} {len(v['files'])} files" for k, v in data["commits"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
