"""The evaluation engine on a GPU: adversarial corpus table, edit -> verdict latency, timing fidelity.

    .venv/bin/python benchmarks/eval_gpu.py [--skip-corpus] [--skip-latency] [--skip-fidelity]

Prints each table and writes benchmarks/corpus-<date>.md (GPU, driver, torch in the header).

- corpus: every case of tests/adversarial_corpus.py (cheats with a static rule run twice: as written,
  and with the rule relaxed so the runtime defence decides), expected vs got status and rule, seconds;
- latency: a fresh candidate directory and a fresh Evaluator (cold: worker start + full build), then
  one line of kernels.cu changed and evaluated again (warm), in ``test`` mode (goal <= 5 s warm,
  <= 30 s cold) and in ``benchmark`` mode (torch.compile cached after the first run);
- fidelity: the same candidate benchmarked twice; ratios of the medians (goal within 2%).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial_corpus import CASES, HONEST, PROBLEMS, check_verdict, materialize  # noqa: E402

from kernelpilot.evaluation import EvalSettings, Evaluator  # noqa: E402

BASE = EvalSettings(test_timeout_s=180, benchmark_timeout_s=600)
EDITS = ("out[i] = alpha * x[i] + y[i];", "out[i] = fmaf(alpha, x[i], y[i]);")


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line, sep] + ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows])


def corpus(work: Path) -> tuple[str, int]:
    directory = work / "corpus-candidate"
    rows, failures = [], 0
    with Evaluator(BASE, workdir=work / "corpus-eval") as ev:
        for case in CASES:
            for relaxed in ([False, True] if case.static_rule else [True]):
                path = materialize(case, directory)
                ev.settings = dataclasses.replace(
                    BASE, relaxed_policy=list(case.relax) if relaxed else [], allowed_libraries=list(case.allowed),
                    test_timeout_s=60 if case.expect == {"timeout"} else BASE.test_timeout_s)
                t0 = time.monotonic()
                v = ev.evaluate(PROBLEMS[case.problem], path, mode=case.mode)
                seconds = time.monotonic() - t0
                misses = check_verdict(case, v, relaxed=relaxed)
                failures += bool(misses)
                rules = sorted({f.rule for f in v.findings if f.severity == "reject"})
                expected = f"rejected ({case.static_rule})" if case.static_rule and not relaxed else \
                    "/".join(sorted(case.expect)) + (f" ({', '.join(case.rules)})" if case.rules else "")
                name = case.name + (" [policy relaxed]" if case.static_rule and relaxed else "")
                rows.append([name, expected, v.status, ", ".join(rules) or "-", f"{seconds:.1f}",
                             "PASS" if not misses else "FAIL: " + "; ".join(misses)[:160]])
                print(" | ".join(rows[-1]), flush=True)
    return table(["candidate", "expected", "got", "reject rules", "seconds", "check"], rows), failures


def _edit(directory: Path, i: int) -> None:
    path = directory / "kernels.cu"
    text = path.read_text(encoding="utf-8")
    old, new = EDITS[i % 2], EDITS[(i + 1) % 2]
    if old not in text:
        old, new = new, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def latency(work: Path) -> str:
    rows = []
    case = HONEST[0]
    for mode in ("test", "benchmark"):
        directory = Path(tempfile.mkdtemp(prefix=f"lat-{mode}-", dir=work)) / "candidate"
        materialize(case, directory)
        with Evaluator(BASE, workdir=work / f"lat-{mode}") as ev:
            t0 = time.monotonic()
            v = ev.evaluate(PROBLEMS[case.problem], directory, mode=mode)
            cold = time.monotonic() - t0
            build = v.build.seconds if v.build else 0.0
            rows.append([mode, "cold (new worker, full build)", f"{cold:.2f}", f"{build:.2f}", v.status, "<= 30 s"])
            print(rows[-1], flush=True)
            for i in range(3):
                _edit(directory, i)
                t0 = time.monotonic()
                v = ev.evaluate(PROBLEMS[case.problem], directory, mode=mode)
                warm = time.monotonic() - t0
                rebuilt = ",".join(v.build.rebuilt) if v.build else "?"
                rows.append([mode, f"warm edit {i + 1} (rebuilt {rebuilt})", f"{warm:.2f}",
                             f"{v.build.seconds if v.build else 0:.2f}", v.status, "<= 5 s" if mode == "test" else "-"])
                print(rows[-1], flush=True)
    return table(["mode", "run", "edit->verdict s", "build s", "status", "goal"], rows)


def fidelity(work: Path) -> str:
    rows = []
    for case in HONEST:
        directory = work / f"fid-{case.name}"
        materialize(case, directory)
        with Evaluator(BASE, workdir=work / "fid-eval") as ev:
            first = ev.evaluate(PROBLEMS[case.problem], directory, mode="benchmark")
            second = ev.evaluate(PROBLEMS[case.problem], directory, mode="benchmark")
        for impl in ("candidate", "eager", "compiled"):
            a = getattr(first.performance, impl, None) if first.performance else None
            b = getattr(second.performance, impl, None) if second.performance else None
            if a is None or b is None:
                rows.append([case.name, impl, "-", "-", "-", f"{first.status}/{second.status}"])
                continue
            ratio = b.median_ms / a.median_ms
            rows.append([case.name, impl, f"{a.median_ms:.4f}", f"{b.median_ms:.4f}", f"{ratio:.4f}",
                         "PASS" if abs(ratio - 1) <= 0.02 else "FAIL"])
            print(rows[-1], flush=True)
        if first.performance:
            p, sol = first.performance, first.speed_of_light
            pct = sol.pct_of_ceiling if sol else None
            rows.append([case.name, "speedups (run 1)", f"eager {p.speedup_vs_eager or 0:.2f}x",
                         f"compile {p.speedup_vs_compile or 0:.2f}x", f"noise {p.noise_pct or 0:.2f}%",
                         "SOL -" if pct is None else f"SOL {pct:.1f}%"])
    return table(["candidate", "impl", "median 1 (ms)", "median 2 (ms)", "ratio", "within 2%"], rows)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-fidelity", action="store_true")
    parser.add_argument("--out", help="report file (default: benchmarks/corpus-<date>.md, or latency-<date>.md "
                                      "without the corpus)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kp-evalbench-"))
    sections, failures = [], 0
    env_line = ""
    if not args.skip_corpus:
        text, failures = corpus(work)
        sections.append("## Adversarial corpus\n\n" + text)
    if not args.skip_latency:
        sections.append("## Edit -> verdict latency\n\n" + latency(work))
    if not args.skip_fidelity:
        sections.append("## Timing fidelity (same candidate twice)\n\n" + fidelity(work))
    try:
        import torch

        from kernelpilot.evaluation.timing.ceilings import gpu_identity

        name, driver, clocks = gpu_identity(0)
        env_line = f"GPU {name}, driver {driver}, clocks {clocks}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    except Exception as exc:  # noqa: BLE001
        env_line = f"environment unknown ({exc})"
    date = dt.date.today().isoformat()
    report = f"# Evaluation engine on the GPU, {date}\n\n{env_line}\n\n" + "\n\n".join(sections) + "\n"
    out = Path(args.out) if args.out else ROOT / "benchmarks" / f"{'latency' if args.skip_corpus else 'corpus'}-{date}.md"
    out.write_text(report, encoding="utf-8")
    print("\n" + report)
    print(f"written to {out}; corpus failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
