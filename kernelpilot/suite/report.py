"""``kernelpilot report RUN``: the run's figures as markdown (``report.md``), JSON (``report.json``) and a plot
(``speedup.png``: per-problem speedup vs torch.compile, sorted, log scale). The arithmetic is in
kernelpilot.suite.metrics; this module only renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelpilot.suite import metrics as m
from kernelpilot.suite.store import Store


def build_report(store: Store) -> dict[str, Any]:
    meta = store.meta()
    rows = store.rows()
    planned = store.planned()
    picks = m.views(planned, rows)
    multi = any(j["sample"] > 0 for j in planned) or any(r.sample > 0 for r in rows)
    report: dict[str, Any] = {
        "rules": meta.get("rules", "kernelpilot"),
        "mode": meta.get("mode", ""),
        "source": meta.get("source", ""),
        "problems": meta.get("problems", ""),
        "jobs": len(planned),
        "verdicts": len(rows),
        "views": {"sample0": m.by_level(picks["sample0"])},
        "slowest": m.slowest(rows),
        "suspicious": m.suspicious(rows),
        "throughput": m.throughput(store.sessions(), rows),
    }
    if multi:
        report["views"]["best_of_k"] = m.by_level(picks["best_of_k"])
    report["per_problem"] = [
        {"problem": p.problem, "level": p.level, "status": p.status,
         "sample": p.row.sample if p.row else None,
         "speedup_vs_eager": p.row.speedup_vs_eager if p.row else None,
         "speedup_vs_compile": p.row.speedup_vs_compile if p.row else None}
        for p in picks["best_of_k" if multi else "sample0"]]
    return report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def level_table(levels: dict[str, dict[str, Any]]) -> str:
    head = ("| group | problems | pass | faster than eager | faster than compile | geomean vs eager | "
            "geomean vs compile | fast_0 | fast_0.5 | fast_0.8 | fast_1 | fast_1.5 | fast_2 | fast_1 vs compile |")
    lines = [head, "|" + "---|" * 14]
    for name, s in levels.items():
        fp = s["fast_p_vs_eager"]
        lines.append(f"| {name} | {s['problems']} | {_pct(s['pass_rate'])} | {_pct(s['faster_than_eager_rate'])} | "
                     f"{_pct(s['faster_than_compile_rate'])} | {_x(s['geomean_vs_eager'])} | {_x(s['geomean_vs_compile'])} | "
                     + " | ".join(_pct(fp[k]) for k in ("0", "0.5", "0.8", "1", "1.5", "2"))
                     + f" | {_pct(s['fast_1_vs_compile'])} |")
    return "\n".join(lines)


def render_markdown(report: dict[str, Any], plot: str | None) -> str:
    out = [f"# Suite report: {report['source']}", "",
           f"Scoring rules: **{report['rules']}**"
           + (" (KernelBench's: PyTorch ops allowed in ModelNew, each listed as a warning; every other check as strict)"
              if report["rules"] == "kernelbench" else " (kernelpilot's: PyTorch compute ops in ModelNew are refused)")
           + f"; mode **{report['mode']}**; {report['jobs']} jobs, {report['verdicts']} verdicts stored.", ""]
    for view, title in (("sample0", "Sample 0 (what KernelBench's fast_p scores)"), ("best_of_k", "Best of k samples")):
        if view in report["views"]:
            out += [f"## {title}", "", level_table(report["views"][view]), ""]
            statuses = report["views"][view]["overall"]["statuses"]
            out += ["Statuses: " + ", ".join(f"{k} {v}" for k, v in statuses.items()), ""]
    out += ["Every problem counts in every rate (a missing, unstarted or failed one as a failure). Faster means "
            "pass and speedup > 1. Geomeans are over the passing problems with a timing; fast_p (vs eager, "
            "KernelBench's baseline) and fast_1 vs compile are over all problems.", ""]
    t = report["throughput"]
    out += ["## Throughput", "", f"Wall time {t['wall_s']:.1f} s; {t['evaluated']} candidates evaluated"
            + (f"; {t['candidates_per_minute']:.1f} candidates per minute." if t["candidates_per_minute"] else "."), ""]
    if t["gpus"]:
        out += ["| GPU | requests | busy s | held s | busy share while queued | busy of wall |", "|---|---|---|---|---|---|"]
        for name, g in sorted(t["gpus"].items()):
            out.append(f"| {name} | {g['requests']} | {g['busy_s']:.1f} | {g['held_s']:.1f} | {_pct(g['busy_share'])} | "
                       f"{_pct(g['busy_of_wall'])} |")
        out.append("")
    if report["slowest"]:
        out += ["## Slowest evaluations", ""] + [f"- {d['job']}: {d['status']}, {d['seconds']:.1f} s" for d in report["slowest"]] + [""]
    out += ["## Most suspicious", ""]
    out += [f"- {d['job']} ({d['status']}): " + "; ".join(d["reasons"][:4]) for d in report["suspicious"]] or ["- none flagged"]
    out.append("")
    if plot:
        out += [f"![speedup vs torch.compile]({plot})", ""]
    return "\n".join(out)


def plot_speedups(report: dict[str, Any], path: Path) -> bool:
    """Per-problem speedup vs torch.compile of the passing problems, sorted, log scale; False without timings."""
    points = sorted((p["speedup_vs_compile"], p["problem"]) for p in report["per_problem"]
                    if p["status"] == "ok" and p["speedup_vs_compile"])
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


def write_report(run_dir: Path) -> tuple[dict[str, Any], str]:
    """Write report.md, report.json and speedup.png in ``run_dir``; returns (report, markdown)."""
    store = Store(run_dir)
    try:
        report = build_report(store)
    finally:
        store.close()
    plot = "speedup.png" if plot_speedups(report, Path(run_dir) / "speedup.png") else None
    text = render_markdown(report, plot)
    (Path(run_dir) / "report.md").write_text(text, encoding="utf-8")
    (Path(run_dir) / "report.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return report, text
