"""What a build process's exit costs: builds whose compile is a no-op, timed through a waiting builder (CPU or GPU).

    python benchmarks/builder_exit.py --out OUT [--repeats 3]

A directory candidate whose build record is removed (torch's builder runs, ninja finds nothing to compile) and a
single-file candidate whose build record is removed (the builder runs the file, load_inline finds its library
built) are built ``--repeats`` times each by a standby builder that imported torch already, as in a pairing
session. What is left of such a build is starting the request, the builder's own work, and the process's exit.
Writes OUT/builder-exit.json and prints each build's seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from load_check import standby_ready  # noqa: E402

DATA = ROOT / "tests" / "data"


def main() -> int:
    from kernelpilot.evaluation.build.load_inline import INLINE_RECORD
    from kernelpilot.evaluation.build.step import build_candidate, standby_env
    from kernelpilot.evaluation.candidate import load_candidate

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(DATA / "candidates" / "vector_scale_kp", work / "directory")
    (work / "single").mkdir(parents=True)
    shutil.copy(DATA / "candidates" / "single_file" / "model_new_inline.py", work / "single" / "model_new_inline.py")
    cases = {"directory": (work / "directory", "kernelpilot-build.json"),
             "single file": (work / "single" / "model_new_inline.py", INLINE_RECORD)}
    seconds: dict[str, list[float]] = {}
    for name, (path, record) in cases.items():
        build_dir = work / f"objects-{name.replace(' ', '-')}"
        first = build_candidate(load_candidate(path), build_dir=build_dir, arch="sm_90", timeout_s=900)
        assert first.ok, first.log_tail
        seconds[name] = []
        for _ in range(args.repeats):
            (build_dir / record).unlink(missing_ok=True)
            standby = standby_ready(standby_env())
            try:
                t0 = time.monotonic()
                report = build_candidate(load_candidate(path), build_dir=build_dir, arch="sm_90", timeout_s=900,
                                         standby=standby)
                seconds[name].append(round(time.monotonic() - t0, 3))
                assert report.ok and report.rebuilt == [], (report.rebuilt, report.log_tail)
            finally:
                standby.close()
        print(f"{name}: " + " / ".join(f"{s:.2f}" for s in seconds[name])
              + f" s (median {statistics.median(seconds[name]):.2f})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "builder-exit.json").write_text(json.dumps(seconds, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
