"""CuTe-DSL candidates on a GPU (issue 53), in one Evaluator with a warm worker as the pairing UI keeps it:
examples/rmsnorm_cute copied to a scratch folder, then

1. the first run in a new worker: test verdict, with the CuTe cache as the caller left it (cute_gpu.sh empties
   it first, so the compile is build time: phases build_warmup);
2. re-run, nothing changed: nothing compiles (loaded from kernelpilot's cache);
3. warm kernel edits (a constant of the kernel changed, correct each time): test verdicts, their wall time;
4. a helper edit (row_config.py): recompiles; 5. a breaking kernel edit: must be `incorrect`;
6. benchmark mode; 7. KernelBench's cute example (as it is: 256 threads for 1 x 128, no bound check) and the
   same with a bound check, if a problem for it is given, under each of the three rule sets; 8. the CuTe twins of
   the corpus cheats (tests/adversarial_corpus.py CUTE_CASES), each checked against the verdict it must get.

    python benchmarks/cute_edits.py --out DIR [--kb-example FILE]
Writes DIR/cute-edits.json and prints one line per verdict."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KB_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return A + B


def get_inputs():
    return [torch.randn(1, 128), torch.randn(1, 128)]


def get_init_inputs():
    return []
'''


SAVE: list[Path] = []  # cute-edits.json, rewritten after every verdict (a call cut at its limit keeps them)
DONE: list[dict[str, Any]] = []


def record(v: Any, wall: float, what: str) -> dict[str, Any]:
    rec = {"what": what, "status": v.status, "wall_s": round(wall, 3),
           "build_s": v.build.seconds if v.build else None, "phases": dict(v.phases),
           "rebuilt": list(v.build.rebuilt) if v.build else [], "cache": v.build.cache if v.build else "",
           "findings": sorted({f.rule for f in v.findings}), "flags": list(v.flags)[:4],
           "error": (v.error or "")[:400], "summary": (v.summary or "")[:200],
           "in_bounds": v.correctness.in_bounds if v.correctness else None,
           "trial_messages": sorted({t.message for t in v.correctness.trials if t.message})[:3]
           if v.correctness else [],
           "kernelbench": v.kernelbench.status if v.kernelbench else None,
           "cache_notes": [d.message for d in (v.build.diagnostics if v.build else [])
                           if d.tool == "cute" and d.severity == "warning"]}
    if v.performance is not None:
        rec["speedup_vs_eager"] = getattr(v.performance, "speedup_vs_eager", None)
        rec["candidate_ms"] = getattr(v.performance, "candidate_ms", None)
    compiled = ", ".join(rec["rebuilt"]) or ("nothing (cache hit)" if rec["cache"] == "hit" else "-")
    print(f"{what:<34} {v.status:<14} {rec['wall_s']:>7} s  warm-up {rec['phases'].get('build_warmup', '-')} s  "
          f"compiled {compiled}  "
          f"{','.join(rec['findings'])} {rec['error'][:120]} {'; '.join(rec['trial_messages'])[:160]}"
          f"{' | ' + '; '.join(rec['cache_notes'])[:300] if rec['cache_notes'] else ''}", flush=True)
    DONE.append(rec)
    for path in SAVE:
        path.write_text(json.dumps(DONE, indent=1))
    return rec


def corpus_twins(work: Path) -> list[dict[str, Any]]:
    """The CuTe twins of the corpus cheats, each as it is and (a statically refused one) relaxed to reach the
    runtime defence; ``expected`` lists what the verdict missed (empty: right)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import dataclasses

    from adversarial_corpus import CUTE_CASES, PROBLEMS, check_verdict, materialize

    from kernelpilot.evaluation import EvalSettings, Evaluator

    base = EvalSettings(device="cuda", build_timeout_s=600.0, rounds=3, samples_per_round=10)
    rows: list[dict[str, Any]] = []
    with Evaluator(base, workdir=work / "eval-twins") as ev:
        for case in CUTE_CASES:
            for relaxed in ([True, False] if case.static_rule else [True]):
                directory = materialize(case, work / "twins" / "candidate")
                ev.settings = dataclasses.replace(base, relaxed_policy=list(case.relax) if relaxed else [])
                t0 = time.monotonic()
                v = ev.evaluate(PROBLEMS[case.problem], directory, mode=case.mode)
                rec = record(v, time.monotonic() - t0, f"{case.name}{'' if relaxed else ' (as written)'}")
                rec["expected"] = check_verdict(case, v, relaxed=relaxed)
                for path in SAVE:
                    path.write_text(json.dumps(DONE, indent=1))
                print(f"    expected {sorted(case.expect)}: {'right' if not rec['expected'] else rec['expected']}",
                      flush=True)
                rows.append(rec)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kb-example", type=Path, default=None)
    ap.add_argument("--edits", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="stop after the cold run, the re-run and the edits")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    SAVE.append(args.out / "cute-edits.json")
    from kernelpilot.config import load_config
    from kernelpilot.evaluation import EvalSettings, Evaluator

    work = Path(tempfile.mkdtemp(prefix="kp-cute-"))
    example = work / "rmsnorm_cute"
    shutil.copytree(ROOT / "examples" / "rmsnorm_cute", example)
    problem, candidate = example / "problem.py", example / "candidate"
    model = candidate / "model_new.py"
    original = model.read_text()
    config = load_config(example, overrides={"problem": str(problem)}, env={})
    settings = EvalSettings.from_config(config, device="cuda", build_timeout_s=600.0)
    rows: list[dict[str, Any]] = []
    with Evaluator(settings, workdir=work / "eval", standby_builder=True) as ev:
        def run(p: Path, c: Path, mode: str, what: str) -> None:
            t0 = time.monotonic()
            rows.append(record(ev.evaluate(p, c, mode), time.monotonic() - t0, what))

        run(problem, candidate, "test", "first run, a new worker")
        run(problem, candidate, "test", "re-run, nothing changed")
        for n in range(1, args.edits + 1):  # a real kernel edit: the epsilon's literal spelled differently
            model.write_text(original.replace("inv = cute.math.rsqrt(total / cutlass.Float32(n) + eps",
                                              f"inv = cute.math.rsqrt(total / cutlass.Float32(n) + eps * {1 + n}.0 "
                                              f"/ {1 + n}.0", 1))
            run(problem, candidate, "test", f"warm kernel edit {n}")
        model.write_text(original)
        if args.quick:
            return 0
        helper = candidate / "row_config.py"
        helper.write_text(helper.read_text() + "\n# edited\n")
        run(problem, candidate, "test", "helper edit (row_config.py)")
        model.write_text(original.replace("out = xf * inv *", "out = xf * inv * 1.5 *", 1))
        run(problem, candidate, "test", "breaking edit (must be incorrect)")
        model.write_text(original)
        run(problem, candidate, "benchmark", "benchmark")
    # KernelBench's example with KernelBench's settings: the example's extra shape sets (one input) are not its
    if args.kb_example is not None and args.kb_example.is_file():
        kb = work / "kb"
        kb.mkdir()
        (kb / "problem.py").write_text(KB_PROBLEM)
        shutil.copy(args.kb_example, kb / "model_new_ex_add_cute.py")
        text = args.kb_example.read_text()
        bounded = text.replace("    a_val = gA[mi, ni]", "    if mi < m:\n        a_val = gA[mi, ni]", 1)
        bounded = bounded.replace("    b_val = gB[mi, ni]\n\n    gC[mi, ni] = a_val + b_val",
                                  "        b_val = gB[mi, ni]\n        gC[mi, ni] = a_val + b_val", 1)
        (kb / "model_new_bounded.py").write_text(bounded)
        for rules in ("kernelpilot", "kernelbench", "kernelbench-v0.1"):
            with Evaluator(EvalSettings(device="cuda", build_timeout_s=600.0, rules=rules),
                           workdir=work / f"eval-kb-{rules}") as ev:
                for name, what in (("model_new_ex_add_cute.py", "as is"), ("model_new_bounded.py", "bound check")):
                    t0 = time.monotonic()
                    rows.append(record(ev.evaluate(kb / "problem.py", kb / name, "test"), time.monotonic() - t0,
                                       f"KB cute example, {what} [{rules}]"))
    rows += corpus_twins(work)
    (args.out / "cute-edits.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
