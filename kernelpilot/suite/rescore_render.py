"""The re-scoring section (kernelpilot.suite.rescore) as markdown."""

from __future__ import annotations

from typing import Any

from kernelpilot.suite.rescore import KB_FAST_P


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def scores_table(levels: dict[str, Any]) -> str:
    head = ("| group | score | problems | pass | " + " | ".join(f"fast_{k}" for k in KB_FAST_P)
            + " | geomean vs eager | geomean vs compile | static checker valid | pass and static valid |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, both in levels.items():
        kb, ours = both["kernelbench"], both["ours"]
        static = f"{kb['static_valid']} of {kb['static_checked']}" if kb["static_checked"] else "not run"
        both_ok = str(kb["pass_and_static_valid"]) if kb["static_checked"] else "-"
        lines.append(f"| {name} | KernelBench | {kb['problems']} | {_pct(kb['pass_rate'])} | "
                     + " | ".join(_pct(kb["fast_p_vs_eager"][k]) for k in KB_FAST_P)
                     + f" | {_x(kb['geomean_vs_eager'])} | not timed by its harness | {static} | {both_ok} |")
        lines.append(f"| {name} | kernelpilot | {ours['problems']} | {_pct(ours['pass_rate'])} | "
                     + " | ".join(_pct(ours["fast_p_vs_eager"][k]) for k in KB_FAST_P)
                     + f" | {_x(ours['geomean_vs_eager'])} | {_x(ours['geomean_vs_compile'])} | | |")
    return "\n".join(lines)


def differences_lines(section: dict[str, Any]) -> list[str]:
    diffs = section["differences"]
    titles = section["difference_titles"]
    total = sum(len(v) for v in diffs.values())
    out = ["### Where KernelBench's status and ours differ", ""]
    if not total:
        return out + ["No verdict's two scores differ.", ""]
    out += [f"{total} verdicts differ, by reason (one reason each, from the verdict's findings, status and scores):",
            "",
            "| reason | verdicts | problems |", "|---|---|---|"]
    for reason, items in diffs.items():
        jobs = ", ".join(d["job"] for d in items[:12]) + (f", ... ({len(items) - 12} more)" if len(items) > 12 else "")
        out.append(f"| {titles[reason]} | {len(items)} | {jobs} |")
    out.append("")
    for reason, items in diffs.items():
        out += [f"**{titles[reason]}**", "", "| job | ours | KernelBench | why |", "|---|---|---|---|"]
        out += [f"| {d['job']} | {d['ours']} | {d['kernelbench']} | {d['detail'].replace('|', '/')[:300]} |"
                for d in items]
        out.append("")
    return out


def claims_lines(claims: dict[str, Any]) -> list[str]:
    out = ["### Claimed speedups", "", f"From `{claims['file']}`; measured on {claims['measured_on'] or 'this run'}"
           ". A claim holds when the measured speedup is at least 0.9 x the claim or the claim is within the measured "
           "spread (interquartile times); no honest verdict when our status is not ok or nothing was measured.", "",
           "| line | problem | sample | figure | claimed | claimed on | measured | KernelBench's harness | verdict | "
           "why |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for row in claims["rows"]:
        where = f"{row['key'] or row['problem']}"
        if row["key"] is None:
            out.append(f"| {row['line']} | {row['problem']} | {row['sample']} | - | - | {row['claimed_gpu'] or '-'} | "
                       f"- | - | unmatched | {row['unmatched']} |")
            continue
        dup = f" (duplicate of line {row['duplicate_of']})" if row["duplicate_of"] else ""
        for f in row["figures"]:
            out.append(f"| {row['line']}{dup} | {where} | {row['sample']} | {f['figure']} | {_x(f['claimed'])} | "
                       f"{row['claimed_gpu'] or '-'} | {_x(f['measured'])} | {_x(f['kernelbench_measured'])} | "
                       f"**{f['verdict']}** | {f['why']} |")
    counts: dict[str, int] = {}
    for row in claims["rows"]:
        for f in row["figures"]:
            counts[f["verdict"]] = counts.get(f["verdict"], 0) + 1
    unmatched = sum(1 for r in claims["rows"] if r["key"] is None)
    dups = sum(1 for r in claims["rows"] if r["duplicate_of"])
    out += ["", "Claims: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            + f"; unmatched rows {unmatched}; duplicate rows {dups}.", ""]
    return out


def render_rescore(section: dict[str, Any]) -> list[str]:
    checker = section["static_checker"]
    out = ["## Re-scoring: KernelBench's score and ours", "",
           f"KernelBench's score is its own harness reproduced in our worker (precision {section['precision']}, its "
           "seeds, trials, allclose tolerance and CUDA-event timing, the reference timed in this run on this GPU); "
           "ours is the verdict's status (fresh inputs, fp64 reference, the runtime audit). "
           "KernelBench's static checker "
           + (f"(`{checker['path']}`, backend detected per file) is a column of its own: its batch scorer does not "
              "call it." if checker["path"] else f"was not run: {checker['not_run']}."), ""]
    for view, title in (("sample0", "Sample 0"), ("best_of_k", "Best of k (each score picks its own best sample)")):
        if view in section["views"]:
            out += [f"### {title}", "", scores_table(section["views"][view]), ""]
    overall = section["views"]["sample0"]["overall"]["kernelbench"]
    if overall["pass_without_own_kernel"]:
        out += [f"KernelBench passes {overall['pass_without_own_kernel']} sample-0 solutions with no kernel of their "
                "own (pure PyTorch rewrites).", ""]
    out += differences_lines(section)
    if "claims" in section:
        out += claims_lines(section["claims"])
    out += ["### Per solution", "", "| job | ours | KernelBench | static checker | difference |",
            "|---|---|---|---|---|"]
    for j in section["per_job"]:
        kb = j["kernelbench"] + (f" {j['kernelbench_speedup']:.2f}x" if j["kernelbench_speedup"] else "")
        ours = j["ours"] + (f" {j['speedup_vs_eager']:.2f}x" if j["speedup_vs_eager"] and j["ours"] == "ok" else "")
        out.append(f"| {j['job']} | {ours} | {kb} | {j['static_label'].replace('|', '/')[:160]} | "
                   f"{j['difference'] or ''} |")
    out.append("")
    return out
