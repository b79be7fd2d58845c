"""The suite on one GPU, on two, and on two through Ray: measured scaling (issue 19).

    OUT=/tmp/out python benchmarks/suite_scaling.py [--runs 0 0,1 ray:2] [--mode test] [--timeout 120]

Assembles 26 problems with solutions: the eight examples with their reference candidates and 18 cases
of the adversarial corpus, a planted crash (illegal address) and a planted hang (a spinning kernel)
among them. Every run starts from cleared build caches (the precompiled headers stay, as on a machine
in use; `--prime` builds them first) and is one `kernelpilot suite` process:

- ``0`` or ``0,1``: ``--gpus 0`` / ``--gpus 0,1`` on this machine;
- ``ray:N``: ``--ray auto`` on a one-node Ray cluster started here with N GPUs.

Writes each run's report under $OUT and scaling.md: wall time, candidates per minute, the speed-up over
the first run, each GPU's busy share, every candidate's status side by side, what the crash and the hang
cost (their slot, how long the next job on that GPU waited, and how many requests other GPUs served
meanwhile), and whether two requests ever overlapped on one GPU (read from the run's results.sqlite:
the workers' own request windows). Exits 1 when statuses differ between runs or from what the corpus
expects, or when requests overlapped.
Every process it starts, Ray's included, gets NCCL_NVLS_ENABLE=0 and the other multicast switches off.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite_gpu import ROOT, materialize_jobs, one_node_ray, prime_headers, ray_importable, suite  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from adversarial_corpus import CASES  # noqa: E402

EXAMPLES = ("softmax", "rmsnorm", "layernorm", "cross_entropy", "diag_matmul", "residual_rmsnorm_gate",
            "linear_sum_scale", "gemm_bias_gelu")
ADVERSARIAL = ("honest_scale_add", "honest_scale_add_vec4", "honest_softmax", "stale_memory", "partial_write",
               "zeros_low_magnitude", "torch_op_in_forward", "extension_never_called", "side_stream_native",
               "side_stream_python", "try_except_fallback", "input_mutation", "precision_downgrade",
               "triton_honest_scale_add", "triton_honest_softmax", "triton_partial_write",
               "crash_illegal_address", "hang_infinite_loop")
PLANTED = ("crash_illegal_address", "hang_infinite_loop")
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def windows(run: Path) -> list[dict]:
    """Every stored verdict that reached a GPU: its job, GPU, status, request window and slot seconds."""
    con = sqlite3.connect(run / "results.sqlite")
    out = []
    for job, gpu, status, start, end, verdict, created in con.execute(
            "SELECT job_key, gpu, status, worker_start, worker_end, verdict, created_at FROM verdicts"):
        phases = (json.loads(verdict) if verdict else {}).get("phases") or {}
        if gpu is None or (start is None and "suite_slot" not in phases):
            continue  # never reached a GPU (rejected before it, build error, missing)
        if start is None:  # killed by the watchdog: no window of its own; its slot ended with the verdict
            start, end = created - float(phases["suite_slot"]), created
        slot = float(phases.get("suite_slot", (end or start) - start))
        out.append({"job": job.split("#")[0], "gpu": gpu, "status": status, "start": start,
                    "end": end if end is not None else start + slot, "slot": slot})
    con.close()
    return sorted(out, key=lambda w: (w["gpu"], w["start"]))


def overlaps(ws: list[dict]) -> list[str]:
    """Pairs of requests whose windows overlap on one GPU (there must be none)."""
    found = []
    for a, b in zip(ws, ws[1:]):
        if a["gpu"] == b["gpu"] and b["start"] < a["end"] - 1e-3:
            found.append(f"{a['job']} and {b['job']} on {a['gpu']}")
    return found


def planted_cost(ws: list[dict], job: str) -> str:
    """The planted job's slot, the wait of the next job on its GPU, and the other GPUs' work meanwhile."""
    mine = next((w for w in ws if w["job"] == job), None)
    if mine is None:
        return "did not reach a GPU"
    t0, t1 = mine["start"], mine["start"] + mine["slot"]
    same = [w for w in ws if w["gpu"] == mine["gpu"] and w["start"] >= t0 and w is not mine]
    wait = f"next on {mine['gpu']} {same[0]['start'] - t1:+.1f} s after its slot" if same else "last on its GPU"
    others = sum(1 for w in ws if w["gpu"] != mine["gpu"] and w["start"] < t1 and w["end"] > t0)
    return f"slot {mine['slot']:.1f} s; {wait}; {others} requests served on other GPUs meanwhile"


def one_run(spec: str, jobs: list[tuple[str, Path, Path]], suite_dir: Path, mode: str, timeout: float,
            out: Path) -> dict:
    run = out / f"run-{spec.replace(',', '-').replace(':', '')}"
    if not spec.startswith("ray"):
        result = suite(jobs, suite_dir, mode, timeout, run, ["--gpus", spec])
    elif not ray_importable():
        return {"error": "not run: `import ray` failed on this machine"}
    else:
        with one_node_ray(int(spec.partition(":")[2] or 1)) as failed:
            if failed:
                return {"error": failed}
            result = suite(jobs, suite_dir, mode, timeout, run, ["--ray", "auto"])
    if result.get("error"):
        return {"wall_s": result["wall_s"], "error": f"no report: {result['error']}"}
    report = json.loads((run / "report.json").read_text())
    ws = windows(run)
    return {"wall_s": result["wall_s"], "per_min": result["per_min"], "statuses": result["statuses"],
            "gpus": {g: v.get("busy_share") for g, v in sorted(report["throughput"]["gpus"].items())},
            "overlaps": overlaps(ws), "planted": {job: planted_cost(ws, job) for job in PLANTED}}


def expected_statuses(jobs: list[str]) -> dict[str, set[str]]:
    """What each job should get: ok for the examples, the corpus's expectation for its cases."""
    by_name = {c.name: set(c.expect) for c in CASES}
    return {job: by_name.get(job, {"ok"}) for job in jobs}


def table(runs: dict[str, dict], jobs: list[str], mode: str, timeout: float,
          expected: dict[str, set[str]] | None = None) -> tuple[str, bool]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    ok = True
    base = next((r for r in runs.values() if r.get("per_min")), None)
    lines = [f"# Suite scaling ({mode} mode, {len(jobs)} candidates, timeout {timeout:g} s)", "",
             "| run | wall s | candidates/min | x first run | busy share per GPU | overlapping requests |",
             "|---|---|---|---|---|---|"]
    for name, r in runs.items():
        if r.get("error"):
            lines.append(f"| {name} | {r.get('wall_s', 0):.1f} | - | - | - | {r['error'][:120]} |")
            continue
        gpus = ", ".join(f"{g} {pct(s)}" for g, s in r["gpus"].items())
        ok &= not r["overlaps"]
        lines.append(f"| {name} | {r['wall_s']:.1f} | {r['per_min']:.2f} | {r['per_min'] / base['per_min']:.2f}x | "
                     f"{gpus} | {'; '.join(r['overlaps']) or 'none'} |")
    names = [n for n, r in runs.items() if not r.get("error")]
    expected = expected or {}
    lines += ["", "| candidate | expected | " + " | ".join(names) + " | same in every run |",
              "|---|---|" + "---|" * (len(names) + 1)]
    for job in jobs:
        got = [str(runs[n]["statuses"].get(job)) for n in names]
        want = expected.get(job)
        as_expected = want is None or all(g in want for g in got)
        ok &= len(set(got)) == 1 and as_expected
        lines.append(f"| {job} | {' or '.join(sorted(want)) if want else '-'} | " + " | ".join(got)
                     + f" | {'yes' if len(set(got)) == 1 else 'NO'}{'' if as_expected else ' (unexpected)'} |")
    lines += ["", "What the planted crash and hang cost:", ""]
    for n in names:
        lines += [f"- {n}: " + "; ".join(f"**{job}** {cost}" for job, cost in runs[n]["planted"].items())]
    return "\n".join(lines) + "\n", ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=["0", "0,1", "ray:2"],
                    help="GPU lists for --gpus, or ray:N for --ray auto on a one-node cluster of N GPUs")
    ap.add_argument("--mode", default="test", choices=("test", "benchmark"))
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--prime", action="store_true", help="build every candidate once first and wait for the "
                    "precompiled headers, so that every run finds them built")
    args = ap.parse_args()
    os.environ.update(MULTICAST_OFF)
    out = Path(os.environ.get("OUT") or ROOT / "benchmarks" / "suite-scaling-out").resolve()
    out.mkdir(parents=True, exist_ok=True)
    suite_dir = out / "suite"
    jobs = materialize_jobs(suite_dir, EXAMPLES, ADVERSARIAL)
    if args.prime:
        prime_headers(jobs, suite_dir, args.timeout, out / "run-prime")
    runs = {}
    for spec in args.runs:
        name = f"--ray auto ({spec.partition(':')[2] or 1} GPUs)" if spec.startswith("ray") else f"--gpus {spec}"
        runs[name] = one_run(spec, jobs, suite_dir, args.mode, args.timeout, out)
        print(f"{name}: {runs[name].get('wall_s', 0):.1f} s {runs[name].get('error', '')}", flush=True)
    (out / "scaling.json").write_text(json.dumps(runs, indent=1))
    keys = [k for k, _, _ in jobs]
    text, ok = table(runs, keys, args.mode, args.timeout, expected_statuses(keys))
    (out / "scaling.md").write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
