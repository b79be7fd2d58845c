"""The load check after a full build by ninja alone, in a fresh process and in the waiting builder (CPU or GPU host).

    python benchmarks/load_check.py --out OUT [--example cross_entropy] [--edits 3]

A copy of the example is built in full, then, per edit, a ``__device__`` constant (a new value each time) is
appended to the header binding.cpp includes: host code, so the save takes a full build by ninja alone, and its
library needs a symbol the last full build's did not, so it is load-checked (device_only.after_full_build). Each
edit is built in two copies of the example, one without and one with a standby builder (waited for until it imported
torch), and the wall time of ``build_candidate`` is set beside the build's own seconds: the gap is the check.
Writes OUT/load-check.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def standby_ready(env: dict[str, str]) -> Any:
    """A standby builder, once its process has imported torch (as in a pairing session, it waited a while)."""
    from kernelpilot.evaluation.build.standby import Standby

    standby = Standby(env)
    start = time.monotonic()
    while time.monotonic() - start < 120:
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(standby.proc.pid)], capture_output=True, text=True)
        if int(out.stdout.strip() or 0) > 300_000:  # torch imported: its libraries are mapped
            time.sleep(2.0)
            break
        time.sleep(0.2)
    return standby


def timed_build(candidate_dir: Path, build_dir: Path, standby: Any) -> dict[str, Any]:
    from kernelpilot.evaluation.build.step import build_candidate
    from kernelpilot.evaluation.candidate import load_candidate

    t0 = time.monotonic()
    report = build_candidate(load_candidate(candidate_dir), build_dir=build_dir, arch="sm_90", timeout_s=900,
                             standby=standby)
    wall = time.monotonic() - t0
    return {"ok": report.ok, "wall_s": round(wall, 3), "build_s": report.seconds,
            "gap_s": round(wall - report.seconds, 3), "command": report.command[:80]}


def main() -> int:
    from kernelpilot.evaluation.build.step import standby_env
    from kernelpilot.native.sources import local_includes

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--example", default="cross_entropy")
    parser.add_argument("--edits", type=int, default=3)
    args = parser.parse_args()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    for way in ("fresh process", "standby"):
        candidate = work / way.replace(" ", "-") / "candidate"
        shutil.copytree(ROOT / "examples" / args.example / "candidate", candidate)
        build_dir = candidate.parent / "objects"
        header = local_includes(candidate / "binding.cpp", candidate)[0]
        original = header.read_text()
        cold = timed_build(candidate, build_dir, None)
        print(f"{way}: cold {cold['ok']} {cold['wall_s']} s", flush=True)
        for n in range(1, args.edits + 1):
            if n > 1:  # back to the header as it was, built: the edit's symbol is new again
                header.write_text(original)
                timed_build(candidate, build_dir, None)
            header.write_text(original + f"static __device__ const int kp_load_check_{n} = {n};\n")
            standby = standby_ready(standby_env()) if way == "standby" else None
            try:
                row = {"way": way, "edit": n, **timed_build(candidate, build_dir, standby)}
            finally:
                if standby is not None:
                    standby.close()
            rows.append(row)
            print(f"  {way} edit {n}: {row}", flush=True)
    checks = direct_checks(work / "standby" / "objects", args.edits)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load-check.json").write_text(json.dumps({"builds": rows, "checks": checks}, indent=1))
    print(f"\n{'way':<15} {'ok':>4} {'build s':>8} {'wall s':>8} {'gap s (median)':>15}")
    for way in ("fresh process", "standby"):
        mine = [r for r in rows if r["way"] == way]
        build, wall = (statistics.median(r[k] for r in mine) for k in ("build_s", "wall_s"))
        print(f"{way:<15} {sum(r['ok'] for r in mine):>2}/{len(mine)} {build:>8.2f} {wall:>8.2f}"
              f" {statistics.median(r['gap_s'] for r in mine):>15.2f}")
    for way, seconds in checks.items():
        print(f"load_error alone, {way}: " + " / ".join(f"{x:.2f}" for x in seconds) + " s")
    return 0


def direct_checks(build_dir: Path, repeats: int) -> dict[str, list[float]]:
    """``load_error`` of the last library alone, in a fresh process and by a waiting builder."""
    from kernelpilot.evaluation.build.device_only import load_error
    from kernelpilot.evaluation.build.step import build_env, standby_env
    from kernelpilot.evaluation.candidate import load_candidate

    library = next(build_dir.glob("*.so"))
    env = build_env(load_candidate(build_dir.parent / "candidate"), build_dir=build_dir, arch="sm_90")
    out: dict[str, list[float]] = {"fresh process": [], "standby": []}
    for _ in range(repeats):
        for way in out:
            standby = standby_ready(standby_env()) if way == "standby" else None
            t0 = time.monotonic()
            error = load_error(library, env, standby)
            out[way].append(round(time.monotonic() - t0, 3))
            assert error == "", error
            if standby is not None:
                standby.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
