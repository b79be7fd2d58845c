"""``kernelpilot report RUN``: the run's figures as markdown (``report.md``), JSON (``report.json``) and a plot
(``speedup.png``: per-problem speedup vs torch.compile, sorted, log scale). The arithmetic is in
kernelpilot.suite.metrics; this module only renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelpilot.rules import get_rules
from kernelpilot.suite import metrics as m
from kernelpilot.suite import rescore
from kernelpilot.suite.rescore_render import claims_lines, render_rescore
from kernelpilot.suite.slot_use import queue_depth, slot_lines, slot_seconds
from kernelpilot.suite.store import Store


def build_report(store: Store, *, checkout: Path | None = None, claims: Path | None = None) -> dict[str, Any]:
    """The run's figures; with KernelBench scores in its verdicts (a KernelBench preset), the re-scoring section
    (KernelBench's score beside ours, its static checker from ``checkout``, the differences, ``claims``)."""
    meta = store.meta()
    rows = store.rows()
    planned = store.planned()
    picks = m.views(planned, rows)
    multi = any(j["sample"] > 0 for j in planned) or any(r.sample > 0 for r in rows)
    done = {r.job_key for r in rows}
    not_run = [j["job_key"] for j in planned if j["job_key"] not in done]
    report: dict[str, Any] = {
        "rules": meta.get("rules", "kernelpilot"),
        "mode": meta.get("mode", ""),
        "source": meta.get("source", ""),
        "problems": meta.get("problems", ""),
        "run": str(store.run_dir),
        # where a KernelBench checkout's problems came from (runs made before this was stored have none)
        "kernelbench": meta.get("kernelbench") or [],
        "problem_files": meta.get("problem_files") or {},
        "jobs": len(planned),
        "verdicts": len(rows),
        "not_run_yet": len(not_run),  # planned jobs without a verdict (every sample)
        "complete": not not_run,
        "not_run_yet_jobs": not_run,
        "views": {"sample0": m.by_level(picks["sample0"])},
        "engine": m.engine_health(rows),
        "slowest": m.slowest(rows),
        "suspicious": m.suspicious(rows),
        "throughput": {**m.throughput(store.sessions(), rows), "slot_seconds": slot_seconds(rows),
                       "queue_depth": queue_depth(rows)},
        # the versions of kernelpilot's code (git tree of kernelpilot/, +dirty) that judged the verdicts, with counts
        "commits": store.code_versions(),
    }
    if multi:
        report["views"]["best_of_k"] = m.by_level(picks["best_of_k"])
    report["per_problem"] = [
        {"problem": p.problem, "level": p.level, "status": p.status,
         "sample": p.row.sample if p.row else None,
         "speedup_vs_eager": p.row.speedup_vs_eager if p.row else None,
         "speedup_vs_compile": p.row.speedup_vs_compile if p.row else None,
         "no_compile_baseline": bool(p.row and m.no_compile_baseline(p.row))}
        for p in picks["best_of_k" if multi else "sample0"]]
    report["compile_fails_check"] = [  # torch.compile's own output failing the candidates' check, per problem
        {"problem": p.problem, "level": p.level, "error": m.compile_fails_check(p.row)[len("failed: "):]}
        for p in picks["best_of_k" if multi else "sample0"] if p.row is not None and m.compile_fails_check(p.row)]
    if rescore.has_kernelbench(rows):
        report["rescore"] = rescore.build_rescore(meta, planned, rows, checkout=checkout, claims=claims)
    elif claims is not None:
        report["claims"] = rescore.claims_section(claims, planned, rows)
    return report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _gib(v: int | None) -> str:
    return "?" if v is None else f"{v / 2**30:.2f} GiB"


def level_table(levels: dict[str, dict[str, Any]]) -> str:
    head = ("| group | problems | pass | faster than eager | faster than compile | geomean vs eager | "
            "geomean vs compile | fast_0 | fast_0.5 | fast_0.8 | fast_1 | fast_1.5 | fast_2 | fast_1 vs compile | "
            "failed | not run yet |")
    lines = [head, "|" + "---|" * 16]
    for name, s in levels.items():
        fp = s["fast_p_vs_eager"]
        lines.append(f"| {name} | {s['problems']} | {_pct(s['pass_rate'])} | {_pct(s['faster_than_eager_rate'])} | "
                     f"{_pct(s['faster_than_compile_rate'])} | {_x(s['geomean_vs_eager'])} | "
                     f"{_x(s['geomean_vs_compile'])} | "
                     + " | ".join(_pct(fp[k]) for k in ("0", "0.5", "0.8", "1", "1.5", "2"))
                     + f" | {_pct(s['fast_1_vs_compile'])} | {s['failed']} | {s['not_run_yet']} |")
    return "\n".join(lines)


def compile_table(levels: dict[str, dict[str, Any]]) -> str:
    """fast_1 vs torch.compile over all problems (no baseline: not faster) and over those with a baseline."""
    lines = ["| group | problems | no torch.compile baseline | torch.compile fails our check | fast_1 vs compile, "
             "all problems | problems with a baseline | fast_1 vs compile, with a baseline |", "|" + "---|" * 7]
    for name, s in levels.items():
        lines.append(f"| {name} | {s['problems']} | {s['no_compile_baseline']} | {s.get('compile_fails_check', 0)} | "
                     f"{_pct(s['fast_1_vs_compile'])} | {s['with_compile_baseline']} | "
                     f"{_pct(s['fast_1_vs_compile_with_baseline'])} |")
    return "\n".join(lines)


def _kernelbench_lines(report: dict[str, Any]) -> list[str]:
    out = []
    files = report.get("problem_files") or {}
    if files.get("kernelbench_files"):
        matches = ", ".join(f"{k} {n}" for k, n in sorted(files.get("matches", {}).items())) or "no known commit"
        out.append(f"Problem files: {files['kernelbench_files']} KernelBench problems, matching by content: {matches}"
                   + (f"; {files['unknown_count']} changed from every known commit" if files.get("unknown_count")
                      else "")
                   + ".")
    if files.get("warning"):
        out.append(f"**Warning:** {files['warning']}")
    for src in report["kernelbench"]:
        if src.get("commit"):
            how = "its git work tree" + (", with uncommitted changes to the problems" if src.get("dirty") else "") \
                if src.get("from") == "git" else "its COMMIT file"
            out.append(f"KernelBench commit `{src['commit']}` ({src['root']}, from {how}).")
        else:
            out.append(f"KernelBench commit unknown for {src['root']}: {src.get('why', 'not recorded')}.")
    return out


def _engine_lines(engine: dict[str, Any]) -> list[str]:
    out = ["## Engine health (every stored verdict)", "",
           "| group | verdicts | retried | flaky | engine crashes | out of memory | problem too large |",
           "|" + "---|" * 7]
    for name, c in engine["levels"].items():
        out.append(f"| {name} | {c['verdicts']} | {c['retried']} | {c['flaky']} | {c['engine_crashes']} | "
                   f"{c['out_of_memory']} | {c['problem_too_large']} |")
    crashes = engine["levels"]["overall"]["engine_crashes"]
    out += ["", "Engine crashes (a worker died on a candidate that then ran without dying in a fresh worker: a crash "
                f"of kernelpilot's, expected 0): **{crashes}**"
                + (f" ({', '.join(engine['engine_crashes'][:10])})." if crashes else "."),
            "", "Retried: an earlier attempt's worker died and the candidate was judged once more; flaky: the second "
            "attempt ran without dying."]
    if engine["retried"]:
        out.append("")
    for d in engine["retried"][:10]:
        first = d["attempts"][0] if d["attempts"] else {}
        out.append(f"- retried {d['job']} ({d['status']}{', flaky' if d['flaky'] else ''}): the first worker died "
                   f"during {first.get('phase') or '?'}: {first.get('error') or 'no message'}")
    if engine["out_of_memory"]:
        out += ["", "Out of GPU memory:", ""]
        out += [f"- {d['job']} ({d['status']}): the harness held {_gib(d['engine_held_bytes'])} when it called the "
                f"candidate, the failing allocation asked for {_gib(d['requested_bytes'])}"
                + (f"; {_gib(d['device_free_bytes'])} of {_gib(d['device_total_bytes'])} free afterwards"
                   if d["device_total_bytes"] is not None else "") + (f"; in {d['phase']}" if d["phase"] else "")
                for d in engine["out_of_memory"]]
    if engine["problem_too_large"]:
        out += ["", "## Problems too large for this GPU", "",
                "The problem's own eager call does not fit an empty GPU: about the problem, not the candidate (each "
                "still counts as a failure in the rates above).", ""]
        out += [f"- {d['job']}: {d['error'] or 'problem_too_large'}" for d in engine["problem_too_large"]]
    out.append("")
    return out


def render_markdown(report: dict[str, Any], plot: str | None) -> str:
    out = [f"# Suite report: {report['source']}", "",
           f"Scoring rules: **{report['rules']}** ({get_rules(report['rules']).summary})"
           + f"; mode **{report['mode']}**; {report['jobs']} jobs, {report['verdicts']} verdicts stored.", ""]
    kb = _kernelbench_lines(report)
    out += kb + [""] if kb else []
    versions = report.get("commits") or {}
    if len(versions) > 1:
        out += ["**Verdicts from more than one version of kernelpilot's code** (git tree of kernelpilot/: verdicts): "
                + ", ".join(f"`{v[:12]}{'+dirty' if v.endswith('+dirty') else ''}`: {n}" for v, n in versions.items()),
                ""]
    if not report["complete"]:
        out += [f"**Incomplete run:** {report['not_run_yet']} of {report['jobs']} planned jobs not run yet. Each "
                "counts as a failure in every rate over all problems (as KernelBench counts a missing one) and is "
                f"shown apart, as not run yet. Run them with `kernelpilot suite --resume {report['run']}`.", ""]
    for view, title in (("sample0", "Sample 0 (what KernelBench's fast_p scores)"), ("best_of_k", "Best of k samples")):
        if view in report["views"]:
            out += [f"## {title}", "", level_table(report["views"][view]), ""]
            overall = report["views"][view]["overall"]
            out += ["Statuses: " + (", ".join(f"{k} {v}" for k, v in overall["statuses"].items()) or "none yet")
                    + (f"; not run yet {overall['not_run_yet']}" if overall["not_run_yet"] else ""), ""]
            if report["mode"] == "benchmark":
                out += ["vs torch.compile:", "", compile_table(report["views"][view]), ""]
    fails = report.get("compile_fails_check") or []
    if fails:  # a c0 "incorrect" there is torch.compile's own, not a conversion bug
        out += [f"**torch.compile itself fails our check on {len(fails)} problems** (its own output, the candidates' "
                "check unchanged): " + "; ".join(f"{Path(f['problem']).name}: {f['error'][:120]}" for f in fails[:12])
                + ("; ..." if len(fails) > 12 else ""), ""]
    out += ["Every problem counts in every rate (a missing, unstarted, failed or not yet run one as a failure). Faster "
            "means pass and speedup > 1. Geomeans are over the passing problems with a timing; fast_p (vs eager, "
            "KernelBench's baseline) and fast_1 vs compile are over all problems. A passing verdict without a "
            "torch.compile time (no torch.compile baseline) counts as not faster than torch.compile; the last column "
            "of the torch.compile table leaves those problems out.", ""]
    if "rescore" in report:
        out += render_rescore(report["rescore"])
    elif "claims" in report:
        out += claims_lines(report["claims"])
    out += _engine_lines(report["engine"])
    t = report["throughput"]
    out += ["## Throughput", "", f"Wall time {t['wall_s']:.1f} s; {t['evaluated']} candidates evaluated"
            + (f"; {t['candidates_per_minute']:.1f} candidates per minute." if t["candidates_per_minute"] else "."), ""]
    if t["gpus"]:
        out += ["| GPU | requests | busy s | held s | busy share while queued | busy of wall |",
                "|---|---|---|---|---|---|"]
        for name, g in sorted(t["gpus"].items()):
            out.append(f"| {name} | {g['requests']} | {g['busy_s']:.1f} | {g['held_s']:.1f} | "
                       f"{_pct(g['busy_share'])} | {_pct(g['busy_of_wall'])} |")
        out.append("")
    out += slot_lines(t.get("slot_seconds") or {}, t.get("queue_depth") or [])
    if report["slowest"]:
        out += ["## Slowest evaluations", ""]
        out += [f"- {d['job']}: {d['status']}, {d['seconds']:.1f} s" for d in report["slowest"]] + [""]
    out += ["## Most suspicious", ""]
    out += [f"- {d['job']} ({d['status']}): " + "; ".join(d["reasons"][:4])
            for d in report["suspicious"]] or ["- none flagged"]
    out.append("")
    if plot:
        out += [f"![speedup vs torch.compile]({plot})", ""]
    return "\n".join(out)


def plot_speedups(report: dict[str, Any], path: Path) -> bool:
    """Per-problem speedup vs torch.compile of the passing problems, sorted, log scale; False without timings."""
    points = sorted((p["speedup_vs_compile"], p["problem"]) for p in report["per_problem"]
                    if p["status"] == "ok" and p["speedup_vs_compile"] and not p.get("no_compile_baseline"))
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(points) + 2), 4.0))
    values = [v for v, _ in points]
    ax.bar(range(len(values)), values, color=["#2a7" if v > 1 else "#c44" for v in values])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("speedup vs torch.compile (log)")
    ax.set_xlabel(f"passing problems, sorted ({len(values)} of {len(report['per_problem'])})")
    if len(points) <= 40:
        ax.set_xticks(range(len(values)), [n for _, n in points], rotation=70, fontsize=7, ha="right")
    ax.set_title(f"rules: {report['rules']}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_report(run_dir: Path, *, claims: Path | None = None,
                 checkout: Path | None = None) -> tuple[dict[str, Any], str]:
    """Write report.md, report.json and speedup.png in ``run_dir``; returns (report, markdown). ``claims`` and
    ``checkout`` (a KernelBench checkout for its static checker) are kept in the run: later reports use them too."""
    if claims is not None:
        rescore.parse_claims(claims)  # a malformed file stops here, before it is kept in the run
    store = Store(run_dir)
    try:
        if claims is not None or checkout is not None:
            store.set_meta(**({"claims": str(Path(claims).resolve())} if claims is not None else {}),
                           **({"kernelbench_checkout": str(Path(checkout).resolve())} if checkout is not None else {}))
        meta = store.meta()
        claims = Path(meta["claims"]) if meta.get("claims") else None
        checkout = Path(meta["kernelbench_checkout"]) if meta.get("kernelbench_checkout") else None
        report = build_report(store, checkout=checkout, claims=claims)
    finally:
        store.close()
    plot = "speedup.png" if plot_speedups(report, Path(run_dir) / "speedup.png") else None
    text = render_markdown(report, plot)
    (Path(run_dir) / "report.md").write_text(text, encoding="utf-8")
    (Path(run_dir) / "report.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return report, text
