"""Why verdicts on real KernelBench work were decided by the engine (issue 25): the evidence, on the GPU.

    OUT=/tmp/out python benchmarks/kb_diagnose.py mixed|compile ... --kernelbench KB

- ``mixed [--runs 2] [--mode test]``: the suite-scaling corpus (examples, cheats, a planted crash and
  hang), KernelBench's example solutions and its three adversarial kernels, as one `kernelpilot suite`
  run, repeated. Per run: every status and, for every worker death, the worker log (its native
  frames resolved with addr2line). A table of the statuses side by side is printed last.
- ``compile [PROBLEM_KEY ...]``: the torch.compile baseline inside the worker, as the engine measures it
  (``Evaluator.baselines``), confined as usual, with Inductor's compile threads at 1, and unconfined;
  the notes and the worker log of each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kb_corpus import EXPECTED, kernelbench_jobs  # noqa: E402
from suite_gpu import ROOT, materialize_jobs, suite  # noqa: E402
from suite_scaling import ADVERSARIAL, EXAMPLES, expected_statuses  # noqa: E402

FRAME = re.compile(r"kernelpilot-native-trace:\s+#\d+ (\S+) \+(0x[0-9a-f]+)")


def resolve_frames(text: str) -> str:
    """Append addr2line's function and line to each native frame of a crash log."""
    lines = []
    for line in text.splitlines():
        m = FRAME.search(line)
        if m and shutil.which("addr2line"):
            try:
                r = subprocess.run(["addr2line", "-f", "-C", "-e", m.group(1), m.group(2)], capture_output=True,
                                   text=True, timeout=20)
                where = " | ".join(r.stdout.split("\n")[:2]).strip()
                line += f"   => {where}"
            except (OSError, subprocess.SubprocessError):
                pass
        lines.append(line)
    return "\n".join(lines)


def mixed(args: argparse.Namespace, out: Path) -> int:
    suite_dir = out / "suite"
    jobs = materialize_jobs(suite_dir, EXAMPLES, ADVERSARIAL) + kernelbench_jobs(args.kernelbench, suite_dir)
    keys = [k for k, _, _ in jobs]
    expected = expected_statuses(keys)
    expected.update(EXPECTED)
    runs: dict[str, dict] = {}
    for i in range(args.runs):
        run = out / f"run-{i}"
        t0 = time.time()
        result = suite(jobs, suite_dir, args.mode, args.timeout, run, ["--gpus", "0"])
        result["wall_s"] = round(time.time() - t0, 1)
        deaths, retried = {}, []
        if (run / "results.sqlite").is_file():
            import sqlite3

            con = sqlite3.connect(run / "results.sqlite")
            for job, status, verdict in con.execute("SELECT job_key, status, verdict FROM verdicts"):
                v = json.loads(verdict) if verdict else {}
                err = str(v.get("error") or "")
                if v.get("attempts") or v.get("flaky"):  # retried in a fresh worker after a death
                    retried.append(job.split("#")[0])
                if "killed by" in err or "exited with status" in err or "native-trace" in err \
                        or "Debug memory block" in err:
                    deaths[job.split("#")[0]] = resolve_frames(err)
            con.close()
        for job, text in deaths.items():
            (out / f"death-run{i}-{job}.txt").write_text(text)
        result["deaths"], result["retried"] = sorted(deaths), sorted(retried)
        runs[f"run {i}"] = result
        print(f"run {i}: {result['wall_s']} s, deaths: {sorted(deaths)}, retried: {sorted(retried)}", flush=True)
        (out / "mixed.json").write_text(json.dumps(runs, indent=1, default=str))  # after each run: a cut step keeps it
    names = list(runs)
    lines = ["| job | expected | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    bad = 0
    for key in keys:
        got = [str(runs[n].get("statuses", {}).get(key)) for n in names]
        want = expected.get(key) or {"ok"}
        mark = "" if all(g in want for g in got) and len(set(got)) == 1 else " <-"
        bad += bool(mark)
        lines.append(f"| {key} | {'/'.join(sorted(want))} | " + " | ".join(got) + f" |{mark}")
    text = "\n".join(lines)
    (out / "mixed.md").write_text(text + "\n")
    print(text)
    print(f"{bad} jobs unexpected or unstable; worker deaths per run: " +
          ", ".join(f"{n}: {len(r.get('deaths', []))}" for n, r in runs.items()) + "; retried per run: " +
          ", ".join(f"{n}: {len(r.get('retried', []))}" for n, r in runs.items()))
    return 0


def compile_check(args: argparse.Namespace, out: Path) -> int:
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.evaluation import EvalSettings, Evaluator

    base = args.kernelbench / "KernelBench"
    keys = args.keys or ["level1/23_Softmax", "level1/36_RMSNorm_", "level2/1_Conv2D_ReLU_BiasAdd",
                         "level2/40_Matmul_Scaling_ResidualAdd", "level3/1_MLP", "level3/43_MinGPTCausalAttention"]
    rows = []
    variants = [("confined", {}, True), ("confined, compile threads 1", {"TORCHINDUCTOR_COMPILE_THREADS": "1"}, True),
                ("unconfined", {}, False)]
    for label, env, confine in variants:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        work = out / f"compile-{len(rows)}"
        try:
            with Evaluator(EvalSettings(confine=confine, rounds=2, samples_per_round=5), workdir=work) as ev:
                for key in keys:
                    path = next(base.glob(f"{key}.py"), None)
                    if path is None:
                        continue
                    t0 = time.time()
                    try:
                        b = ev.baselines(path)
                        note = "; ".join(b.notes) or "ok"
                        compiled = b.compiled.median_ms if b.compiled else None
                    except KernelpilotError as exc:
                        note, compiled = f"error: {exc}", None
                    rows.append({"variant": label, "problem": key, "compiled_ms": compiled, "note": note[:400],
                                 "seconds": round(time.time() - t0, 1)})
                    print(f"{label} | {key} | {compiled} | {note[:200]}", flush=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        for log in work.rglob("*.log"):
            shutil.copyfile(log, out / f"compile-{label.replace(' ', '_').replace(',', '')}-{log.name}")
    (out / "compile.json").write_text(json.dumps(rows, indent=1))
    return 0


STRESS = r"""
import gc, sys, time
import torch
from kernelpilot.evaluation.audit import runtime as ra
from kernelpilot.problem import load_problem
variant, rounds, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
models = []
for f in files:
    m = load_problem(f).load_module()
    with torch.device("cuda"):
        inputs = list(m.get_inputs())
    models.append((m.Model(*m.get_init_inputs()).cuda().eval(), [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]))
t0 = time.time()
for r in range(rounds):
    for model, inputs in models:
        if variant in ("both", "ops"):
            ops, out = ra.record_ops(model, inputs)
            del out
        if variant in ("both", "profiler"):
            ra.profile_call(model, inputs, "cuda")
    gc.collect()
    print(f"round {r} done", flush=True)
print(f"{variant}: {rounds} rounds over {len(models)} models in {time.time() - t0:.1f} s, no crash", flush=True)
"""


def stress(args: argparse.Namespace, out: Path) -> int:
    """The runtime audit's operator recorder and torch.profiler, many times in one process, under
    PYTHONMALLOC=debug: does either corrupt the Python heap of a long-lived process?"""
    base = args.kernelbench / "KernelBench"
    files = [str(p) for p in sorted(base.glob("level1/*.py"))[:0]]
    for key in args.keys or ["level1/19_ReLU", "level1/23_Softmax", "level2/1_Conv2D_ReLU_BiasAdd",
                             "level3/1_MLP", "level1/1_Square_matrix_multiplication_"]:
        files += [str(p) for p in base.glob(f"{key}.py")]
    small = out / "small"
    small.mkdir(exist_ok=True)
    shrunk = []
    for f in files:  # the same operators at small sizes: many rounds in little time
        text = Path(f).read_text()
        text = re.sub(r"^(\w+) = (\d+)( \* \d+)*\s*$", lambda m: f"{m.group(1)} = {min(int(m.group(2)), 256)}",
                      text, flags=re.M)
        dst = small / Path(f).name
        dst.write_text(text)
        shrunk.append(str(dst))
    rows = []
    for variant in ("both", "profiler", "ops"):
        env = dict(os.environ, PYTHONMALLOC="debug", PYTHONTRACEMALLOC="8", PYTHONFAULTHANDLER="1")
        t0 = time.time()
        log = out / f"stress-{variant}.log"
        with open(log, "w") as fh:  # written as it runs: a step cut short keeps what it printed
            try:
                r = subprocess.run([sys.executable, "-c", STRESS, variant, str(args.runs), *shrunk], stdout=fh,
                                   stderr=subprocess.STDOUT, text=True, env=env, timeout=args.timeout)
                code = r.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        tail = log.read_text()[-3000:]
        rows.append({"variant": variant, "returncode": code, "seconds": round(time.time() - t0, 1), "tail": tail})
        print(f"== {variant}: exit {code} after {time.time() - t0:.0f} s\n{tail[-1500:]}", flush=True)
    (out / "stress.json").write_text(json.dumps(rows, indent=1))
    return 0


STRESS2 = r"""
import gc, importlib.util, sys, time
import torch
from kernelpilot.evaluation.audit import runtime as ra
from kernelpilot.problem import load_problem
variant, rounds, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
items = []
for i, pair in enumerate(pairs):
    prob, cand = pair.split("::")
    m = load_problem(prob).load_module()
    spec = importlib.util.spec_from_file_location(f"cand{i}", cand)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    with torch.device("cuda"):
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in m.get_inputs()]
    items.append((mod.ModelNew(*m.get_init_inputs()).cuda().eval(), inputs))
print("loaded", len(items), flush=True)
for r in range(rounds):
    for model, inputs in items:
        with torch.no_grad():
            out = model(*inputs)
        if variant in ("both", "ops"):
            ops, o2 = ra.record_ops(model, inputs); del o2
        if variant in ("both", "profiler"):
            ra.profile_call(model, inputs, "cuda")
        del out
    gc.collect()
    if r % 20 == 0:
        print(f"round {r}", flush=True)
print(f"{variant}: {rounds} rounds, no crash", flush=True)
"""


def stress2(args: argparse.Namespace, out: Path) -> int:
    """KernelBench's few-shot candidates that crashed warm workers, called many times in one process:
    plain calls, under the operator recorder, under torch.profiler, and both (no debug allocator)."""
    prompts = args.kernelbench / "src" / "kernelbench" / "prompts" / "few_shot"
    names = args.keys or ["flash_attn", "mnist2", "fuse_gelu", "add"]
    pairs = [f"{prompts / f'model_ex_{n}.py'}::{prompts / f'model_new_ex_{n}.py'}" for n in names]
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(out / "ext"), PYTHONFAULTHANDLER="1")
    t0 = time.time()
    builds = [subprocess.Popen([sys.executable, "-c", STRESS2, "plain", "1", pair], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) for pair in pairs]
    for b in builds:
        b.wait()
    print(f"built in {time.time() - t0:.0f} s", flush=True)
    for variant in ("plain", "ops", "profiler", "both"):
        log = out / f"stress2-{variant}.log"
        t1 = time.time()
        with open(log, "w") as fh:
            try:
                code = subprocess.run([sys.executable, "-c", STRESS2, variant, str(args.runs), *pairs], stdout=fh,
                                      stderr=subprocess.STDOUT, env=env, timeout=args.timeout).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        text = log.read_text()
        print(f"== {variant}: exit {code} after {time.time() - t1:.0f} s; last: {text.strip().splitlines()[-1:]}", flush=True)
        if code not in (0, "timeout"):
            print(text[-2500:], flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=("mixed", "compile", "stress", "stress2"))
    ap.add_argument("keys", nargs="*")
    ap.add_argument("--kernelbench", type=Path, default=ROOT / ".kb")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--mode", default="test")
    ap.add_argument("--timeout", type=float, default=300.0)  # the product's build and test limits
    ap.add_argument("--malloc-debug", action="store_true", help="workers run with PYTHONMALLOC=debug and "
                    "tracemalloc, so a corrupted Python heap is reported where it is found, with the allocation")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT") or "/tmp/kb-diagnose").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.malloc_debug:
        os.environ.update(PYTHONMALLOC="debug", PYTHONTRACEMALLOC="12")
    return {"mixed": mixed, "compile": compile_check, "stress": stress, "stress2": stress2}[args.step](args, out)


if __name__ == "__main__":
    raise SystemExit(main())
