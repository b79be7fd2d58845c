"""Where a warm kernel edit's seconds go on the GPU: the worker under cProfile, the allocator's poisoning, the SASS check.

    python benchmarks/verify_profile.py --out OUT [--examples softmax,rmsnorm] [--edits 3]

Per example (a git copy, one Evaluator with its standby builder, as the pairing UI): a cold test verdict, ``--edits``
kernel edits in test mode, then two benchmarks of one more edit (the first compiles the torch.compile baseline in
the worker, the second does not), every worker request profiled (``KERNELPILOT_WORKER_PROFILE``). Then, in this
process: ``poison_allocator`` timed as verification calls it, beside a live working set like the example's; and
the SASS checks' own seconds (their answer files). Writes OUT/verify-profile.json and OUT/profiles.tar.gz (the
.prof files) and prints, per request, the functions that took the most time.
"""

from __future__ import annotations

import argparse
import json
import pstats
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from device_edits import kernel_file, record, unroll_edit  # noqa: E402
from edit_loop import copy_example  # noqa: E402

WATCHED = ("poison_allocator", "draw_inputs", "clone_inputs", "compare_all", "inputs_equal", "run_model",
           "outputs", "judge_trivial", "rerun", "audit_forward", "measure", "input_pool", "compiled", "_prepare",
           "problem_state", "import_candidate", "build_model", "memory_snapshot", "empty_cache", "synchronize",
           "_spin_for", "for_problem", "benchmark", "verify", "_load", "probe", "fingerprint", "get_ceilings")


def top(prof: Path, n: int = 18) -> list[dict[str, Any]]:
    """The functions of a profile that matter: watched names by cumulative time, then the largest own times."""
    st = pstats.Stats(str(prof))
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        rows.append({"fn": fn, "where": f"{Path(file).name}:{line}", "calls": nc, "own_s": round(tt, 4),
                     "cum_s": round(ct, 4)})
    watched = sorted((r for r in rows if r["fn"] in WATCHED), key=lambda r: -r["cum_s"])[:n]
    own = sorted(rows, key=lambda r: -r["own_s"])[:n]
    return [{"kind": "watched", **r} for r in watched] + [{"kind": "own", **r} for r in own]


def run_example(name: str, edits: int, work: Path, profiles: Path) -> dict[str, Any]:
    from kernelpilot.config import load_config
    from kernelpilot.evaluation import EvalSettings, Evaluator

    example = copy_example(name, work, False)
    problem, candidate = example / "problem.py", example / "candidate"
    config = load_config(example, overrides={"problem": str(problem)}, env={})
    settings = EvalSettings.from_config(config, device="cuda", build_timeout_s=600.0)
    cu = kernel_file(candidate)
    original = cu.read_text()
    where = profiles / name
    where.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"example": name, "runs": []}
    env = {"KERNELPILOT_WORKER_PROFILE": str(where)}

    def run(ev: Any, mode: str, what: str) -> None:
        t0 = time.monotonic()
        v = ev.evaluate(problem, candidate, mode)
        rec = record(v, time.monotonic() - t0, what)
        if "worker_start" in v.phases:  # a worker started for this verdict: where its start went
            rec["worker_start_steps"] = dict(getattr(ev, "last_worker_start_steps", {}))
        row["runs"].append(rec)
        print(f"  {name} {what}: {rec['status']} {rec['wall_s']} s phases {rec['phases']}"
              f"{' start ' + str(rec['worker_start_steps']) if rec.get('worker_start_steps') else ''}", flush=True)

    def staged(ev: Any, what: str) -> None:
        t0 = time.monotonic()
        tested: list[tuple[float, Any]] = []
        v = ev.evaluate(problem, candidate, "benchmark", on_tested=lambda t: tested.append((time.monotonic(), t)))
        rec = record(v, time.monotonic() - t0, what)
        rec["tested_s"] = round(tested[0][0] - t0, 3) if tested else None
        rec["tested_status"] = tested[0][1].status if tested else ""
        row["runs"].append(rec)
        print(f"  {name} {what}: test verdict {rec['tested_s']} s ({rec['tested_status']}), benchmark {rec['status']} "
              f"{rec['wall_s']} s phases {rec['phases']} sass {rec['sass_check']}", flush=True)

    with Evaluator(settings, workdir=work / f"eval-{name}", standby_builder=True, worker_env=env) as ev:
        ev.allow([], [where])
        run(ev, "test", "cold")
        for n in range(1, edits + 1):
            cu.write_text(unroll_edit(original, n))
            run(ev, "test", f"kernel edit {n}")
        cu.write_text(unroll_edit(original, edits + 1))
        run(ev, "benchmark", "benchmark after an edit (compiles the baseline)")
        run(ev, "benchmark", "benchmark again (same build)")
        for n in range(edits):  # the pairing UI's way on a GPU: one benchmark per save, its test verdict staged
            cu.write_text(unroll_edit(original, 100 + n))
            staged(ev, f"staged benchmark after an edit {n + 1}")
    with Evaluator(settings, workdir=work / f"eval2-{name}", worker_env=env) as ev:  # Inductor's caches warm
        ev.allow([], [where])
        run(ev, "benchmark", "benchmark in a fresh worker (Inductor's caches warm)")
    cu.write_text(original)
    row["identity_s"] = sorted(json.loads(p.read_text()).get("seconds", 0.0) for p in work.rglob("*.identity.json"))
    row["profiles"] = {p.name: top(p) for p in sorted(where.glob("*.prof"), key=lambda p: p.stat().st_mtime)}
    return row


def poison_timing(example: str) -> dict[str, Any]:
    """``poison_allocator`` as a trial calls it, beside a working set like the example's (its inputs, a clone, an
    output, the float64 reference)."""
    import torch

    from kernelpilot.evaluation.correctness.inputs import draw_inputs, poison_allocator
    from kernelpilot.problem import load_problem

    module = load_problem(ROOT / "examples" / example / "problem.py").load_module()
    inputs = draw_inputs(module, 1, "normal", "cuda")
    live = [x.clone() for x in inputs if isinstance(x, torch.Tensor)]
    live += [x.double() for x in inputs if isinstance(x, torch.Tensor)]
    nbytes = max(64 << 20, 4 * max(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)))
    times = []
    for _ in range(12):
        scratch = [torch.empty_like(x) for x in live]  # a trial's temporaries, freed before the next poisoning
        del scratch
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        poison_allocator(nbytes, "cuda")
        times.append(time.perf_counter() - t0)
    snap = torch.cuda.memory_snapshot()
    return {"example": example, "poison_bytes": nbytes, "seconds": [round(t, 4) for t in times],
            "segments": len(snap), "reserved_bytes": torch.cuda.memory_reserved()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--examples", default="softmax,rmsnorm")
    p.add_argument("--edits", type=int, default=3)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kp-verify-profile-"))
    profiles = work / "profiles"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result: dict[str, Any] = {"commit": commit, "examples": [], "poison": []}
    names = [n for n in args.examples.split(",") if n]
    for name in names:
        result["examples"].append(run_example(name, args.edits, work, profiles))
        (args.out / "verify-profile.json").write_text(json.dumps(result, indent=1))
    for name in names:
        result["poison"].append(poison_timing(name))
    (args.out / "verify-profile.json").write_text(json.dumps(result, indent=1))
    with tarfile.open(args.out / "profiles.tar.gz", "w:gz") as tar:
        tar.add(profiles, arcname="profiles")
    for ex in result["examples"]:
        print(f"\n== {ex['example']}: SASS checks {ex['identity_s']} s")
        for prof, rows in list(ex["profiles"].items())[-3:]:
            print(f"-- {prof}")
            for r in rows[:14]:
                print(f"   {r['kind']:<7} {r['fn'][:28]:<28} {r['where'][:30]:<30} calls {r['calls']:>6} "
                      f"own {r['own_s']:>7} cum {r['cum_s']:>7}")
    for po in result["poison"]:
        print(f"poison_allocator {po['example']}: {po['seconds']} s ({po['segments']} segments)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
