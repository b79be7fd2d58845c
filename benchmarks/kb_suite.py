"""All of KernelBench through the suite, resumed across device calls (issue 25's target run).

    python benchmarks/kb_suite.py --kernelbench KB --solutions DIR --run RUN [--budget-s 540] [-- SUITE_ARGS...]
    python benchmarks/kb_suite.py --evidence OUTDIR --run RUN --kernelbench KB

Run mode: a first call (RUN has no results.sqlite) clears the build cache, the precompiled headers and
Inductor's and Triton's caches, then starts `kernelpilot suite KB/KernelBench --solutions DIR --mode
benchmark --out RUN`; a later call resumes it (`--resume RUN`). Each call is stopped with SIGINT at
``--budget-s`` (the suite keeps every finished verdict and writes its report), and appends its wall
time and verdict counts to RUN/calls.json, so the throughput is summed over every call.

Evidence mode: from a finished run, writes OUTDIR/report.md and report.json (`kernelpilot report`),
non-ok.md (every verdict that is not ok, with its reason), throughput.md (wall time per call and in
all, candidates per minute, GPU busy share), versions.md (GPU, driver, torch, KernelBench commit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KP = [sys.executable, "-m", "kernelpilot"]


def clear_caches() -> list[str]:
    """Everything a cold machine would not have: built candidates, precompiled headers, Inductor, Triton."""
    import platformdirs

    cache = Path(platformdirs.user_cache_dir("kernelpilot"))
    home = Path.home()
    targets = [cache / name for name in ("builds", "pch", "inductor", "triton")]
    targets += [home / ".triton", home / ".cache" / "torch_extensions", Path("/tmp") / f"torchinductor_{os.environ.get('USER', 'root')}"]
    cleared = []
    for t in targets:
        if t.exists():
            shutil.rmtree(t, ignore_errors=True)
            cleared.append(str(t))
    return cleared


def count(run: Path) -> dict[str, int]:
    db = run / "results.sqlite"
    if not db.is_file():
        return {}
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT status, COUNT(*) FROM verdicts GROUP BY status").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


def run_call(args: argparse.Namespace) -> int:
    run = args.run.resolve()
    first = not (run / "results.sqlite").is_file()
    calls_file = run / "calls.json"
    calls = json.loads(calls_file.read_text()) if calls_file.is_file() else []
    cleared = clear_caches() if first else []
    problems = args.kernelbench / "KernelBench" if (args.kernelbench / "KernelBench").is_dir() else args.kernelbench
    argv = ([*KP, "suite", str(problems), "--solutions", str(args.solutions), "--mode", "benchmark", "--out", str(run)]
            if first else [*KP, "suite", "--resume", str(run)]) + ["--jsonl", *args.suite_args]
    before = count(run)
    t0 = time.time()
    run.mkdir(parents=True, exist_ok=True)
    log = open(run / f"call{len(calls)}.log", "w")  # inside the run: it travels with run.tar.gz
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait(timeout=args.budget_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # the suite keeps its verdicts and writes the report
        try:  # a verdict in flight is dropped after the grace (resume judges it again): the call must end in time
            proc.wait(timeout=args.grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall = time.time() - t0
    after = count(run)
    run.mkdir(parents=True, exist_ok=True)
    calls.append({"started": t0, "wall_s": round(wall, 1), "exit": proc.returncode, "caches_cleared": cleared,
                  "verdicts_before": sum(before.values()), "verdicts_after": sum(after.values()), "argv": argv})
    calls_file.write_text(json.dumps(calls, indent=1))
    total_wall = sum(c["wall_s"] for c in calls)
    done = sum(after.values())
    print(f"call {len(calls)}: {wall:.0f} s, {done - sum(before.values())} new verdicts; in all {done} verdicts in "
          f"{total_wall:.0f} s ({60 * done / total_wall if total_wall else 0:.1f} candidates/min)")
    print("statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(after.items())))
    return 0


SLOT_PHASES = ("timing", "gpu_wait", "verify", "worker_start", "import", "build_warmup", "audit", "worker_wait")
SUMMED = ("suite_slot", "suite_build", *SLOT_PHASES)  # the phases summed per level


def time_profile(db: Path, wall: float) -> list[str]:
    """Where the suite's wall time went, from every verdict's phases (seconds summed per level): the GPU
    slot (one candidate at a time on the one GPU) and its parts, the builds ahead of it, and the baseline
    service's per-problem work (its torch.compile compiling beside the slot, its timing under the GPU lock)."""
    con = sqlite3.connect(db)
    per: dict[str, dict[str, float]] = {}
    for level, verdict in con.execute("SELECT level, verdict FROM verdicts"):
        ph = (json.loads(verdict) if verdict else {}).get("phases") or {}
        row = per.setdefault(f"level {level}", {"verdicts": 0.0})
        row["verdicts"] += 1
        for k in SUMMED:
            row[k] = row.get(k, 0.0) + float(ph.get(k) or 0.0)
    base = {"problems": 0.0, "seconds": 0.0, "compile_s": 0.0, "exclusive_s": 0.0}
    for (data,) in con.execute("SELECT data FROM baselines"):
        d = json.loads(data)
        base["problems"] += 1
        base["seconds"] += float(d.get("seconds") or 0.0)
        base["compile_s"] += float(d.get("compile_s") or 0.0)
        base["exclusive_s"] += float(d.get("exclusive_s") or 0.0)  # recorded from 2026-12-03 (session 5) on
    con.close()
    per["all"] = {k: sum(r.get(k, 0.0) for r in per.values()) for k in ("verdicts", *SUMMED)}
    cols = ("verdicts", "suite_slot", *SLOT_PHASES, "suite_build")
    lines = ["## Where the time went (seconds, summed over the verdicts' phases)", "",
             "| | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, r in per.items():
        lines.append(f"| {name} | " + " | ".join(f"{r.get(c, 0.0):.0f}" for c in cols) + " |")
    slot = per["all"]["suite_slot"]
    lines += ["", f"- The GPU slot (one candidate at a time) was busy {slot:.0f} s of {wall:.0f} s of wall "
              f"({100 * slot / wall if wall else 0:.0f}%): the slot is the bottleneck; builds ({per['all']['suite_build']:.0f} s "
              "summed over every core) run ahead of it.",
              f"- `gpu_wait`: the slot waiting for the GPU lock while the baseline service timed a problem's eager "
              f"and torch.compile baselines (exclusive); it overlaps the timing phase where the slot waited there for the "
              f"exclusive lock. The service's work: {base['problems']:.0f} problems, "
              f"{base['seconds']:.0f} s, of which {base['compile_s']:.0f} s torch.compile compiling (off the lock)"
              + (f" and {base['exclusive_s']:.0f} s holding the GPU exclusively." if base["exclusive_s"] else
                 "; how long it held the GPU exclusively was not recorded by this run's version.")]
    return lines


def evidence(args: argparse.Namespace) -> int:
    run, out = args.run.resolve(), args.evidence.resolve()
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([*KP, "report", str(run)], check=True, capture_output=True)
    for name in ("report.md", "report.json"):
        shutil.copyfile(run / name, out / name)
    con = sqlite3.connect(run / "results.sqlite")
    rows = con.execute("SELECT job_key, status, verdict, environment FROM verdicts ORDER BY job_key").fetchall()
    con.close()
    lines = ["| problem | status | reason |", "|---|---|---|"]
    env: dict = {}
    for job, status, verdict, environment in rows:
        v = json.loads(verdict) if verdict else {}
        env = env or (json.loads(environment) if environment else {})
        if status != "ok":
            reason = (v.get("summary") or v.get("error") or "").replace("|", "/").splitlines()
            lines.append(f"| {job.split('#')[0]} | {status} | {reason[0][:240] if reason else ''} |")
    (out / "non-ok.md").write_text("\n".join(lines) + "\n")
    calls = json.loads((run / "calls.json").read_text()) if (run / "calls.json").is_file() else []
    wall = sum(c["wall_s"] for c in calls)
    t = ["| call | wall s | verdicts before | after | caches cleared |", "|---|---|---|---|---|"]
    for i, c in enumerate(calls):
        t.append(f"| {i} | {c['wall_s']:.0f} | {c['verdicts_before']} | {c['verdicts_after']} | {'yes' if c['caches_cleared'] else ''} |")
    t.append(f"| all | {wall:.0f} | | {len(rows)} | |")
    t += ["", f"{len(rows)} verdicts in {wall:.0f} s of suite wall time: {60 * len(rows) / wall if wall else 0:.1f} "
          "candidates per minute, build included."]
    t += ["", *time_profile(run / "results.sqlite", wall)]
    (out / "throughput.md").write_text("\n".join(t) + "\n")
    commit = (args.kernelbench / "COMMIT").read_text().strip() if (args.kernelbench / "COMMIT").is_file() else "unknown"
    (out / "versions.md").write_text(
        f"- GPU: {env.get('gpu', '?')} ({env.get('sm', '')}), driver {env.get('driver', '?')}\n"
        f"- torch {env.get('torch', '?')}, CUDA {env.get('cuda', '?')}, Python {env.get('python', '?')}\n"
        f"- KernelBench commit {commit} (levels 1-3 of ScalingIntelligence/KernelBench)\n")
    print((out / "throughput.md").read_text())
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", type=Path, default=ROOT / ".kb")
    ap.add_argument("--solutions", type=Path)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--grace-s", type=float, default=20.0, help="seconds the suite gets after SIGINT, then SIGKILL")
    ap.add_argument("--evidence", type=Path)
    ap.add_argument("suite_args", nargs="*", help="after --: more `kernelpilot suite` flags (--limit, --problems)")
    args = ap.parse_args()
    if args.evidence:
        return evidence(args)
    if not args.solutions and not (args.run / "results.sqlite").is_file():
        ap.error("--solutions DIR is needed for a new run")
    return run_call(args)


if __name__ == "__main__":
    raise SystemExit(main())
