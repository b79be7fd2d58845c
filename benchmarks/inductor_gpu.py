"""GPU evidence for issue #17: torch.compile's own kernels as a Triton candidate, and the Triton cheat twins.

Run on the H200 (about 5-7 minutes):  OUT=/tmp/inductor-gpu python3 benchmarks/inductor_gpu.py [NAME ...]
(NAMEs: a subset of the problems below; "twins [CASE ...]" runs only the cheat twins, those named or all.)

1. For 8 problems (the four memory-bound examples, a fused elementwise chain, a row reduction, a GEMM
   with a GELU epilogue, a conv with ReLU) it records torch.compile's output freshly on this GPU
   (code, the launch config each autotuner chose, which parameter/input each graph input is), converts
   it into a candidate (kernelpilot.inductor), and evaluates it with the engine in benchmark mode.
   Checks: it builds (Triton compiled ahead of time in the build step), it is ``ok``, and its time is
   within 5% of torch.compile's, or the verdict says why not (the engine's within-5% flag).
2. The Triton twins of the adversarial corpus (tests/adversarial_corpus.py, ``triton_*``) get their
   expected verdicts.

Writes $OUT/inductor.json (every verdict), $OUT/candidates/<problem>/ (the converted files) and
$OUT/table.md; prints the table last. Problem sizes are the committed ones (no reduction).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from adversarial_corpus import TRITON, PROBLEMS, check_verdict, materialize  # noqa: E402

from kernelpilot.evaluation import EvalSettings, Evaluator  # noqa: E402

from inductor_fixtures import PROBLEMS as INDUCTOR_PROBLEMS  # noqa: E402  # the problems the fixtures record
# fewer correctness trials and timing rounds than the defaults, to stay near 5 minutes for 8 problems
BASE = EvalSettings(trials=2, distributions=["normal", "uniform"], rounds=3, samples_per_round=10,
                    test_timeout_s=180, benchmark_timeout_s=400)


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line, sep] + ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows])


def inductor_part(out: Path, ev: Evaluator, record: dict) -> tuple[list[list[str]], int]:
    from kernelpilot.inductor.helpers import ConversionError
    from kernelpilot.inductor.generate import inductor_candidate

    rows, failures = [], 0
    wanted = [a for a in sys.argv[1:] if a in INDUCTOR_PROBLEMS] or (
        [] if sys.argv[1:] == ["twins"] else list(INDUCTOR_PROBLEMS))
    for name in wanted:
        problem = INDUCTOR_PROBLEMS[name]
        target = out / "candidates" / name
        t0 = time.monotonic()
        try:
            conversion = inductor_candidate(problem, target)
        except ConversionError as exc:
            failures += 1
            rows.append([name, "-", "conversion failed", "-", "-", "-", "-", "-", f"FAIL: {str(exc)[:120]}"])
            record[name] = {"error": str(exc)}
            print(" | ".join(rows[-1]), flush=True)
            continue
        convert_s = time.monotonic() - t0
        v = ev.evaluate(problem, target, mode="benchmark")
        p = v.performance
        cand = p.candidate.median_ms if p and p.candidate else None
        comp = p.compiled.median_ms if p and p.compiled else None
        ratio = cand / comp if cand and comp else None
        flagged = [f for f in v.flags if f.startswith("inductor candidate")]
        within = ratio is not None and abs(ratio - 1) <= 0.05
        ok = v.status == "ok" and bool(v.build and v.build.ok) and (within or bool(flagged))
        failures += not ok
        libs = ",".join(f.evidence for f in v.findings if f.rule == "library-call") or "-"
        rows.append([name, conversion.configs, v.status, f"{v.build.seconds:.1f}" if v.build else "-",
                     f"{v.phases.get('build_warmup', 0):.2f}", f"{cand:.4f}" if cand else "-",
                     f"{comp:.4f}" if comp else "-", f"{ratio:.3f}" if ratio else "-",
                     ("PASS" if ok else "FAIL") + (f" ({flagged[0][:90]})" if flagged else "") + f" libs={libs}"])
        record[name] = {"verdict": v.to_dict(), "convert_s": convert_s, "configs": conversion.configs,
                        "libraries": conversion.libraries}
        print(" | ".join(rows[-1]), flush=True)
    return rows, failures


def twins_part(out: Path, ev: Evaluator, record: dict, names: list[str]) -> tuple[list[list[str]], int]:
    rows, failures = [], 0
    directory = out / "twins" / "candidate"
    for case in (c for c in TRITON if not names or c.name in names):
        for relaxed in ([False, True] if case.static_rule else [True]):
            path = materialize(case, directory)
            ev.settings = dataclasses.replace(BASE, relaxed_policy=list(case.relax) if relaxed else [],
                                              allowed_libraries=list(case.allowed))
            t0 = time.monotonic()
            v = ev.evaluate(PROBLEMS[case.problem], path, mode=case.mode)
            misses = check_verdict(case, v, relaxed=relaxed)
            failures += bool(misses)
            rules = sorted({f.rule for f in v.findings if f.severity == "reject"})
            name = case.name + (" [relaxed]" if case.static_rule and relaxed else "")
            rows.append([name, "/".join(sorted(case.expect)), v.status, ", ".join(rules) or "-",
                         f"{time.monotonic() - t0:.1f}", "PASS" if not misses else "FAIL: " + "; ".join(misses)[:140]])
            record[f"twin:{name}"] = v.to_dict()
            print(" | ".join(rows[-1]), flush=True)
    ev.settings = BASE
    return rows, failures


def main() -> int:
    out = Path(os.environ.get("OUT") or "inductor-gpu-out")
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {}
    t0 = time.monotonic()
    with Evaluator(BASE, workdir=out / "eval") as ev:
        if sys.argv[1:2] == ["twins"]:  # the Triton twins alone (those named after "twins", or all)
            ind_rows, ind_fail = [], 0
            twin_rows, twin_fail = twins_part(out, ev, record, sys.argv[2:])
        else:
            ind_rows, ind_fail = inductor_part(out, ev, record)
            twin_rows, twin_fail = twins_part(out, ev, record, [])
    (out / "inductor.json").write_text(json.dumps(record, indent=1, default=str))
    text = "\n\n".join([
        table(["problem", "configs", "status", "build s", "warm-up s", "cand ms", "compile ms", "cand/compile",
               "check"], ind_rows),
        table(["triton twin", "expected", "got", "reject rules", "seconds", "check"], twin_rows),
        f"{ind_fail + twin_fail} failure(s); {time.monotonic() - t0:.0f} s in all"])
    (out / "table.md").write_text(text + "\n")
    print("\n" + text, flush=True)
    return 1 if ind_fail + twin_fail else 0


if __name__ == "__main__":
    sys.exit(main())
