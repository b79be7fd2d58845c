"""The suite runner on a GPU: a serial loop of `kernelpilot eval` vs `kernelpilot suite` (vs `--ray auto`).

    OUT=/tmp/out python benchmarks/suite_gpu.py [--mode test|benchmark|build] [--timeout 60] [--no-ray]

Assembles 12 problems with solutions (six examples with their candidates, six adversarial-corpus cases
including a planted crash and a planted hang), clears the build caches before each run (the PCH stays),
then runs (1) `kernelpilot eval --json` per candidate, one after another, (2) `kernelpilot suite`, (3)
`kernelpilot suite --ray auto` on a one-node Ray cluster when `import ray` works. Writes every run's
report under $OUT and throughput.md: wall time, candidates per minute, GPU busy share (the worker's own
request windows), each candidate's status per run and whether they agree; prints that table last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from adversarial_corpus import CASES, PROBLEMS, materialize  # noqa: E402

EXAMPLES = ("softmax", "rmsnorm", "layernorm", "cross_entropy", "diag_matmul", "residual_rmsnorm_gate")
ADVERSARIAL = ("honest_scale_add", "torch_op_in_forward", "side_stream_native", "input_mutation",
               "crash_illegal_address", "hang_infinite_loop")
KP = [sys.executable, "-m", "kernelpilot"]


def materialize_jobs(suite: Path, examples: tuple[str, ...], adversarial: tuple[str, ...]) -> list[tuple[str, Path, Path]]:
    """(key, problem file, candidate) for every job; problems of the examples stay beside their kernelpilot.toml."""
    problems, solutions = suite / "problems", suite / "solutions"
    problems.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in examples:
        dst = solutions / name
        shutil.copytree(ROOT / "examples" / name / "candidate", dst, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("build", "__pycache__"))
        jobs.append((name, ROOT / "examples" / name / "problem.py", dst))
    by_name = {c.name: c for c in CASES}
    for name in adversarial:
        case = by_name[name]
        problem = problems / f"{name}.py"
        shutil.copyfile(PROBLEMS[case.problem], problem)
        cand = materialize(case, solutions / name)
        if cand != solutions / name:  # a Triton case: its own directory, named as the suite looks it up
            shutil.rmtree(solutions / name, ignore_errors=True)
            cand = cand.rename(solutions / name)
        jobs.append((name, problem, cand))
    return jobs


def assemble(suite: Path) -> list[tuple[str, Path, Path]]:
    return materialize_jobs(suite, EXAMPLES, ADVERSARIAL)


def suite_problems(jobs: list[tuple[str, Path, Path]], suite_dir: Path) -> list[str]:
    """What `kernelpilot suite` is given: each example's problem file (beside its kernelpilot.toml) and the
    folder of the copied corpus problems."""
    copied = suite_dir / "problems"
    return [str(p) for _, p, _ in jobs if p.parent != copied] + [str(copied)]


def ray_importable() -> bool:
    return subprocess.run([sys.executable, "-c", "import ray"], capture_output=True).returncode == 0


@contextlib.contextmanager
def one_node_ray(num_gpus: int) -> Iterator[str | None]:
    """A Ray head on this machine with `num_gpus` GPUs for the duration; yields None, or why it did not start."""
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    started = subprocess.run([*ray, "start", "--head", f"--num-gpus={num_gpus}", "--disable-usage-stats",
                              "--include-dashboard=false"], capture_output=True, text=True)
    try:
        yield None if started.returncode == 0 else f"ray start failed: {started.stderr[-400:]}"
    finally:
        subprocess.run([*ray, "stop", "--force"], capture_output=True, text=True)


def clear_build_caches() -> None:
    import platformdirs

    for d in (Path(platformdirs.user_cache_dir("kernelpilot")) / "builds", Path.home() / ".cache" / "torch_extensions"):
        shutil.rmtree(d, ignore_errors=True)


def serial(jobs: list[tuple[str, Path, Path]], mode: str, timeout: float, out: Path) -> dict:
    clear_build_caches()
    out.mkdir(parents=True, exist_ok=True)
    statuses, busy = {}, 0.0
    t0 = time.time()
    for key, problem, cand in jobs:
        r = subprocess.run([*KP, "eval", str(problem), str(cand), "--json", "--mode", mode, "--timeout", str(timeout)],
                           capture_output=True, text=True)
        try:
            v = json.loads(r.stdout)
        except ValueError:
            v = {"status": f"cli-exit-{r.returncode}", "error": r.stderr[-500:]}
        (out / f"{key}.json").write_text(json.dumps(v, indent=1))
        statuses[key] = v.get("status")
        w = v.get("worker_window") or []
        busy += (w[1] - w[0]) if len(w) == 2 else 0.0
        print(f"serial {key}: {statuses[key]} ({time.time() - t0:.0f} s)", flush=True)
    wall = time.time() - t0
    return {"wall_s": wall, "per_min": len(jobs) / (wall / 60), "busy_share": busy / wall, "statuses": statuses}


def suite(jobs: list[tuple[str, Path, Path]], suite_dir: Path, mode: str, timeout: float, run: Path,
          extra: list[str]) -> dict:
    clear_build_caches()
    argv = [*KP, "suite", *suite_problems(jobs, suite_dir), "--solutions", str(suite_dir / "solutions"), "--mode", mode,
            "--timeout", str(timeout), "--out", str(run), "--jsonl", *extra]
    t0 = time.time()
    r = subprocess.run(argv, capture_output=True, text=True)
    wall = time.time() - t0
    (run.parent / f"{run.name}.log").write_text(r.stdout + "\n--- stderr ---\n" + r.stderr)
    if not (run / "report.json").is_file():
        return {"wall_s": wall, "per_min": 0.0, "busy_share": None, "statuses": {}, "error": r.stderr[-800:]}
    report = json.loads((run / "report.json").read_text())
    statuses = {p["problem"]: p["status"] for p in report["per_problem"]}
    gpus = report["throughput"]["gpus"]
    shares = [g["busy_share"] for g in gpus.values() if g.get("busy_share") is not None]
    busy_wall = sum(g["busy_s"] for g in gpus.values()) / wall if wall else None
    return {"wall_s": wall, "per_min": len(jobs) / (wall / 60), "busy_share": min(shares) if shares else None,
            "busy_of_wall": busy_wall, "statuses": statuses}


def prime_headers(jobs: list[tuple[str, Path, Path]], suite_dir: Path, timeout: float, run: Path) -> None:
    """Build everything once and wait for the background precompiled-header builds to finish."""
    from kernelpilot.evaluation.build import pch

    suite(jobs, suite_dir, "build", timeout, run, [])
    root = pch.cache_dir()
    deadline = time.time() + 240
    while time.time() < deadline and root.is_dir() and any(
            pch.Entry(root, d.name).building() for d in root.iterdir() if d.is_dir()):
        time.sleep(1.0)
    built = [d.name for d in root.iterdir() if (d / "preamble.h.gch").is_file()] if root.is_dir() else []
    print(f"primed: {len(built)} precompiled headers ready", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="test", choices=("build", "test", "benchmark"))
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--prime", action="store_true",
                    help="first build every candidate once (build mode) and wait for the precompiled headers it starts: "
                         "the runs compared then all find them built, as on a machine in use")
    ap.add_argument("--serial-from", metavar="JSON", help="take the serial loop's figures from an earlier run's "
                    "serial.json instead of running it again (the table says so)")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT") or ROOT / "benchmarks" / "suite-gpu-out").resolve()
    out.mkdir(parents=True, exist_ok=True)
    suite_dir = out / "suite"
    jobs = assemble(suite_dir)
    if args.prime:
        prime_headers(jobs, suite_dir, args.timeout, out / "run-prime")
    if args.serial_from:
        runs = {"serial eval (earlier run)": json.loads(Path(args.serial_from).read_text())}
    else:
        runs = {"serial eval": serial(jobs, args.mode, args.timeout, out / "serial")}
        (out / "serial.json").write_text(json.dumps(runs["serial eval"], indent=1))
    runs["suite"] = suite(jobs, suite_dir, args.mode, args.timeout, out / "run-suite", [])
    if not args.no_ray and ray_importable():
        with one_node_ray(1):
            runs["suite --ray"] = suite(jobs, suite_dir, args.mode, args.timeout, out / "run-ray", ["--ray", "auto"])

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    base = next(iter(runs.values()))
    lines = [f"# Suite throughput ({args.mode} mode, {len(jobs)} candidates, timeout {args.timeout:g} s)", "",
             "| run | wall s | candidates/min | x serial | GPU busy share (while queued) | GPU busy of wall |",
             "|---|---|---|---|---|---|"]
    for name, r in runs.items():
        lines.append(f"| {name} | {r['wall_s']:.1f} | {r['per_min']:.2f} | {r['per_min'] / base['per_min']:.2f}x | "
                     f"{pct(r.get('busy_share')) if not name.startswith('serial') else '-'} | "
                     f"{pct(r.get('busy_of_wall', r.get('busy_share')))} |")
    names = list(runs)
    lines += ["", "| candidate | " + " | ".join(names) + " | agree |", "|---|" + "---|" * (len(names) + 1)]
    disagree = 0
    for key, _, _ in jobs:
        got = [str(runs[n]["statuses"].get(key)) for n in names]
        same = len(set(got)) == 1
        disagree += not same
        lines.append(f"| {key} | " + " | ".join(got) + f" | {'yes' if same else 'NO'} |")
    lines += ["", f"statuses agree on {len(jobs) - disagree} of {len(jobs)} candidates"]
    for name, r in runs.items():
        if r.get("error"):
            lines.append(f"{name} failed: {r['error']}")
    text = "\n".join(lines)
    (out / "throughput.md").write_text(text + "\n")
    print(text)
    return 0 if disagree == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
