"""The re-scoring section of a suite report: a generation folder scored under a KernelBench preset.

Per level and overall, for sample 0 and best-of-k: KernelBench's score (its harness, reproduced in our
worker: ``Verdict.kernelbench``) and ours (pass rate, fast_p, geomean speedups), KernelBench's static
checker as a column of its own (kernelpilot.suite.kb_static), every verdict whose two scores differ grouped
by reason (kernelpilot.suite.differences) and, with ``--claims FILE``, each claimed speedup beside the
measured one (kernelpilot.suite.claims).

KernelBench's best-of-k picks each problem's best sample by its own score (correct first, then its
speedup); ours by ours. KernelBench's harness times only the eager reference: it has no figure vs
torch.compile.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelpilot.suite import metrics as m
from kernelpilot.suite.claims import check_claims, parse_claims
from kernelpilot.suite.differences import REASON_TITLES, classify, group
from kernelpilot.suite.discovery import ProblemRef
from kernelpilot.suite.kb_static import StaticResult, find_checker, run_checker
from kernelpilot.suite.store import Row
from kernelpilot.verdict import Verdict

KB_FAST_P = ("0", "1", "1.5", "2")


def kb_score(row: Row | None) -> dict[str, Any]:
    return ((row.verdict or {}).get("kernelbench") or {}) if row is not None else {}


def kb_pass(row: Row | None) -> bool:
    return kb_score(row).get("status") == "correct"


def kb_speedup(row: Row | None) -> float | None:
    s = kb_score(row).get("speedup")
    return float(s) if isinstance(s, (int, float)) and s > 0 else None


def has_kernelbench(rows: list[Row]) -> bool:
    return any(kb_score(r) for r in rows)


def _kb_best(planned: list[dict[str, Any]], rows: list[Row]) -> list[m.Pick]:
    picks = m.views(planned, rows)["sample0"]
    by_problem: dict[str, list[Row]] = {}
    for r in rows:
        by_problem.setdefault(r.problem, []).append(r)
    return [m.Pick(p.problem, p.level, max(by_problem[p.problem], key=lambda r: (kb_pass(r), kb_speedup(r) or 0.0))
                   if by_problem.get(p.problem) else None) for p in picks]


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def summarize_kernelbench(picks: list[m.Pick], static: dict[str, StaticResult]) -> dict[str, Any]:
    n = len(picks)
    passed = [p for p in picks if kb_pass(p.row)]
    speeds = [s for p in passed if (s := kb_speedup(p.row)) is not None]
    checked = [static.get(p.row.candidate or "") for p in picks if p.row is not None]
    valid = [p for p in picks if p.row is not None and (s := static.get(p.row.candidate or "")) and s.valid]
    return {
        "problems": n, "passed": len(passed), "pass_rate": _rate(len(passed), n),
        "fast_p_vs_eager": {k: _rate(sum(1 for s in speeds if s > float(k)), n) if speeds or k == "0" else None
                            for k in KB_FAST_P} | {"0": _rate(len(passed), n)},
        "geomean_vs_eager": m.geomean(speeds), "geomean_vs_compile": None, "timed": len(speeds),
        "static_checked": sum(1 for s in checked if s is not None and s.valid is not None),
        "static_valid": len(valid),
        "pass_and_static_valid": sum(1 for p in valid if kb_pass(p.row)),
        "pass_without_own_kernel": sum(1 for p in passed if _rules(p.row) & {"no-kernel"}),
        "statuses": _count(kb_score(p.row).get("status") or (("missing" if p.absent else "not run yet") if p.row is None
                                                             else "no score") for p in picks),
    }


def _rules(row: Row | None) -> set[str]:
    return {f.get("rule", "") for f in ((row.verdict or {}).get("findings") or [])} if row is not None else set()


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return dict(sorted(out.items()))


def summarize_ours(picks: list[m.Pick]) -> dict[str, Any]:
    s = m.summarize(picks)
    return {"problems": s["problems"], "passed": s["passed"], "pass_rate": s["pass_rate"],
            "fast_p_vs_eager": {k: s["fast_p_vs_eager"].get(k) for k in KB_FAST_P},
            "geomean_vs_eager": s["geomean_vs_eager"], "geomean_vs_compile": s["geomean_vs_compile"],
            "fast_1_vs_compile": s["fast_1_vs_compile"], "statuses": s["statuses"]}


def _by_level(ours: list[m.Pick], theirs: list[m.Pick], static: dict[str, StaticResult]) -> dict[str, Any]:
    groups_ours, groups_kb = m._groups(ours), m._groups(theirs)
    return {name: {"kernelbench": summarize_kernelbench(groups_kb[name], static),
                   "ours": summarize_ours(groups_ours[name])}
            for name in groups_ours}


def checkouts(meta: dict[str, Any], given: Path | None) -> list[Path]:
    """Where to look for KernelBench's checker: the checkout given, else the roots of the problems' checkouts."""
    if given is not None:
        return [Path(given).expanduser().resolve()]
    return [Path(src["root"]) for src in meta.get("kernelbench") or [] if src.get("root")]


def build_rescore(meta: dict[str, Any], planned: list[dict[str, Any]], rows: list[Row], *,
                  checkout: Path | None = None, claims: Path | None = None) -> dict[str, Any]:
    precision = (meta.get("overrides") or {}).get("kb_precision") or "fp32"
    checker, why = find_checker(checkouts(meta, checkout))
    files = sorted({r.candidate for r in rows if r.candidate})
    static = run_checker(checker, [Path(f) for f in files], precision, why)
    picks = m.views(planned, rows)
    multi = any(j["sample"] > 0 for j in planned) or any(r.sample > 0 for r in rows)
    views = {"sample0": _by_level(picks["sample0"], picks["sample0"], static)}
    if multi:
        views["best_of_k"] = _by_level(picks["best_of_k"], _kb_best(planned, rows), static)
    differences: list[tuple[str, Any]] = []
    per_job = []
    for r in rows:
        v = Verdict.from_dict(r.verdict) if r.verdict else None
        d = classify(v) if v is not None else None
        if d is not None:
            differences.append((r.job_key, d))
        s = static.get(r.candidate or "")
        per_job.append({"job": r.job_key, "problem": r.problem, "level": r.level, "sample": r.sample, "ours": r.status,
                        "kernelbench": kb_score(r).get("status") or "no score", "kernelbench_speedup": kb_speedup(r),
                        "speedup_vs_eager": r.speedup_vs_eager, "speedup_vs_compile": r.speedup_vs_compile,
                        "static": asdict(s) if s else None, "static_label": s.label() if s else "no file",
                        "difference": d.reason if d else None})
    out: dict[str, Any] = {
        "precision": precision,
        "static_checker": {"path": str(checker) if checker else None, "not_run": why},
        "views": views,
        "differences": {reason: [{"job": job, **asdict(d)} for job, d in items]
                        for reason, items in group(differences).items()},
        "difference_titles": dict(REASON_TITLES),
        "per_job": per_job,
    }
    if claims is not None:
        out["claims"] = claims_section(claims, planned, rows)
    return out


def claims_section(path: Path, planned: list[dict[str, Any]], rows: list[Row]) -> dict[str, Any]:
    refs = list({j["problem"]: ProblemRef(j["problem"], Path(j["problem_path"]), j["level"], j["number"])
                 for j in planned}.values())
    verdicts = {(r.problem, r.sample): r.verdict or {} for r in rows}
    statuses = {(r.problem, r.sample): r.status for r in rows}
    gpu = next((((r.verdict or {}).get("environment") or {}).get("gpu") for r in rows
                if ((r.verdict or {}).get("environment") or {}).get("gpu")), "")
    results = check_claims(parse_claims(path), refs, verdicts, statuses)
    return {"file": str(path), "measured_on": gpu,
            "rows": [{"line": c.claim.line, "problem": c.claim.problem, "sample": c.claim.sample, "key": c.key,
                      "unmatched": c.why_unmatched, "duplicate_of": c.duplicate_of, "claimed_gpu": c.claim.gpu,
                      "status": c.status, "figures": c.figures} for c in results]}
