"""What the re-scoring runs found against what was expected (benchmarks/rescore_gpu.py): the hand-written corpus
against tests/data/generations/expected.json, the generated folder against its expected.json, KernelBench's own
examples against kb_corpus.EXPECTED, a published set's pairs of statuses, a run judged twice; and the summary
(rescore-summary.json and .md) written from them."""

from __future__ import annotations

import json
from pathlib import Path

HARNESS_FAILURES = ("timeout", "runtime_error")


def compare_corpus(run: Path, rules: str, manifest: dict) -> dict:
    from kernelpilot.suite.differences import classify
    from kernelpilot.suite.store import Store
    from kernelpilot.verdict import Verdict

    by_name = {e["generation_name"]: e for e in manifest["files"]}
    store = Store(run)
    rows = store.rows()
    store.close()
    out = {"rules": rules, "verdicts": len(rows), "as_expected": 0, "mismatches": [], "harness_failures": []}
    for r in rows:
        e = by_name.get(Path(r.candidate or "").name)
        if e is None or not r.verdict:
            continue
        v = Verdict.from_dict(r.verdict)
        want = e["kernelpilot"][rules]
        rejects = {f.rule for f in v.findings if f.severity == "reject"}
        problems = []
        if v.status != want["status"]:
            problems.append(f"ours {v.status} (expected {want['status']})")
        if not set(want["rules"]) <= rejects:
            problems.append(f"reject findings {sorted(rejects)} lack {sorted(set(want['rules']) - rejects)}")
        if rules != "kernelpilot":
            kb = v.kernelbench.status if v.kernelbench else "no score"
            if kb != e["kernelbench"][rules]:
                problems.append(f"KernelBench {kb} (expected {e['kernelbench'][rules]})")
            d = classify(v)
            got = d.reason if d else None
            if got != e["difference"][rules] and not (got == "timing" and e["difference"][rules] is None):
                problems.append(f"difference {got} (expected {e['difference'][rules]})")
        if v.status in HARNESS_FAILURES and v.status != want["status"]:  # an expected runtime_error is the candidate's
            out["harness_failures"].append({"file": e["file"], "status": v.status, "error": v.error[:300]})
        if problems:
            out["mismatches"].append({"file": e["file"], "candidate": e["generation_name"], "job": r.job_key,
                                      "problems": problems, "summary": v.summary})
        else:
            out["as_expected"] += 1
    out["expected_files"] = len(manifest["files"])
    return out


def compare_runs(first: Path, again: Path) -> dict:
    """A run judged a second time (``NAME~2``): every job both runs judged, with its status, KernelBench status and
    reject rules; the jobs where any differ are listed (a verdict that changes between two runs of the same
    files on the same machine is not about the candidate)."""
    from kernelpilot.suite.store import Store

    def judged(run: Path) -> dict[str, tuple]:
        store = Store(run)
        rows = store.rows()
        store.close()
        out = {}
        for r in rows:
            v = r.verdict or {}
            rejects = sorted({f.get("rule") for f in v.get("findings") or [] if f.get("severity") == "reject"})
            out[r.job_key] = (r.status, (v.get("kernelbench") or {}).get("status"), rejects)
        return out

    a, b = judged(first), judged(again)
    both = sorted(set(a) & set(b))
    differ = [{"job": j, "first": a[j], "again": b[j]} for j in both if a[j] != b[j]]
    return {"first": first.name, "again": again.name, "judged_twice": len(both), "identical": len(both) - len(differ),
            "different": differ}


def compare_kb(run: Path, rules: str, expected: dict[str, list[str]]) -> dict:
    """KernelBench's own examples and adversarial kernels: both statuses per file; under our default rules,
    ours against kb_corpus.EXPECTED (honest examples ok, the adversarial kernels caught)."""
    import sqlite3

    con = sqlite3.connect(run / "results.sqlite")
    rows = {}
    try:
        for job, status, verdict in con.execute("SELECT job_key, status, verdict FROM verdicts"):
            v = json.loads(verdict) if verdict else {}
            rows[job.split("#")[0]] = {"ours": status, "kernelbench": (v.get("kernelbench") or {}).get("status") or "-"}
    finally:
        con.close()
    unexpected = [k for k, r in rows.items() if rules == "kernelpilot" and r["ours"] not in expected.get(k, ["ok"])]
    failures = [k for k, r in rows.items() if r["ours"] in HARNESS_FAILURES and "crash" not in k and "hang" not in k]
    return {"verdicts": len(rows), "planned": len(expected), "rows": rows, "unexpected": sorted(unexpected), "harness_failures": sorted(failures)}


def compare_folder(run: Path, rules: str, manifest: dict) -> dict:
    from kernelpilot.suite.store import Store

    by_name = {e["file"]: e for e in manifest["files"]}
    store = Store(run)
    rows = store.rows()
    store.close()
    per_pattern: dict[str, dict[str, int]] = {}
    off: list[dict] = []
    failures: list[dict] = []
    both = 0
    for r in rows:
        e = by_name.get(Path(r.candidate or "").name)
        if e is None or not r.verdict:
            continue
        kb = (r.verdict.get("kernelbench") or {}).get("status")
        both += kb is not None
        key = f"{r.status} / KernelBench {kb}"
        per_pattern.setdefault(e["pattern"], {}).setdefault(key, 0)
        per_pattern[e["pattern"]][key] += 1
        if r.status in HARNESS_FAILURES and r.status != e["kernelpilot"]["status"]:
            failures.append({"file": e["file"], "problem": e["problem"], "status": r.status,
                             "error": (r.verdict.get("error") or "")[:300]})
        if rules != "kernelpilot" and (r.status != e["kernelpilot"]["status"]
                                       or (e["kernelbench"] is not None and kb != e["kernelbench"])):
            off.append({"file": e["file"], "problem": e["problem"], "pattern": e["pattern"], "ours": r.status,
                        "kernelbench": kb, "error": (r.verdict.get("error") or "")[:200]})
    return {"rules": rules, "verdicts": len(rows), "with_both_scores": both, "per_pattern": per_pattern,
            "unexpected": off, "harness_failures": failures, "generations": len(manifest["files"])}


def compare_published(run: Path, rules: str, manifest: dict) -> dict:
    """No expected statuses here (published solutions): both scores counted, and every timeout or runtime error
    listed with its error, to be read one by one (the candidate's, or ours?)."""
    from kernelpilot.suite.store import Store

    by_name = {e["generation"]: e for e in manifest["generations"]}
    store = Store(run)
    rows = store.rows()
    store.close()
    pairs: dict[str, int] = {}
    errors: list[dict] = []
    for r in rows:
        e = by_name.get(Path(r.candidate or "").name)
        if e is None or not r.verdict:
            continue
        kb = (r.verdict.get("kernelbench") or {}).get("status")
        key = f"{r.status} / KernelBench {kb}"
        pairs[key] = pairs.get(key, 0) + 1
        if r.status in HARNESS_FAILURES:
            errors.append({"file": e["generation"], "problem": e["problem"], "model": e["model"], "status": r.status,
                           "kernelbench": kb, "error": (r.verdict.get("error") or "")[:300]})
    return {"rules": rules, "verdicts": len(rows), "generations": len(manifest["generations"]),
            "pairs": dict(sorted(pairs.items(), key=lambda kv: -kv[1])), "timeouts_and_runtime_errors": errors}


def write_summary(out: Path, summary: dict, final: bool = False) -> None:
    """rescore-summary.json and .md under OUT, written after every run (a call killed at its limit keeps them)."""
    (out / "rescore-summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    lines = ["# Re-scoring evidence", ""]
    for rules, c in summary["corpus"].items():
        lines.append(f"- corpus under {rules}: {c['verdicts']} of {c['expected_files']} verdicts, {c['as_expected']} as "
                     f"expected, {len(c['mismatches'])} not, {len(c['harness_failures'])} unexpected timeouts or runtime errors")
        lines += [f"  - {m['file']}: {'; '.join(m['problems'])}" for m in c["mismatches"]]
    for rules, c in summary["kb"].items():
        lines.append(f"- KernelBench's examples and adversarial kernels under {rules}: {c['verdicts']} of {c['planned']} verdicts, "
                     f"{len(c['harness_failures'])} timeouts or runtime errors"
                     + (f", ours not as expected under our rules: {', '.join(c['unexpected'])}" if c["unexpected"] else ""))
        lines += [f"  - {job}: ours {row['ours']}, KernelBench {row['kernelbench']}" for job, row in sorted(c["rows"].items())]
    for rules, c in summary["folder"].items():
        lines.append(f"- folder under {rules}: {c['verdicts']} of {c['generations']} verdicts, {c['with_both_scores']} "
                     f"with both scores, {len(c['unexpected'])} unexpected, {len(c['harness_failures'])} unexpected "
                     "timeouts or runtime errors")
        lines += [f"  - {u['file']} ({u['problem']}, {u['pattern']}): ours {u['ours']}, KernelBench {u['kernelbench']}"
                  for u in c["unexpected"][:40]]
    for set_name, runs in (summary.get("published") or {}).items():
        for rules, c in runs.items():
            lines.append(f"- {set_name} under {rules}: {c['verdicts']} of {c['generations']} verdicts; ours / KernelBench's: "
                         + ", ".join(f"{k} {n}" for k, n in c["pairs"].items()))
            lines += [f"  - {e['file']} ({e['problem']}, {e['model']}): {e['status']}, KernelBench {e['kernelbench']}: "
                      f"{e['error'][:160]}" for e in c["timeouts_and_runtime_errors"][:60]]
    for name, c in (summary.get("repeats") or {}).items():
        lines.append(f"- {name}: {c['judged_twice']} jobs judged in both runs, {c['identical']} with the same status, "
                     f"KernelBench status and reject rules, {len(c['different'])} not")
        lines += [f"  - {d['job']}: {d['first']} then {d['again']}" for d in c["different"]]
    refreshed = summary.get("refreshed") or {}
    for what, names in (refreshed.get("changed_files") or {}).items():
        lines.append(f"- {what}: {len(names)} file(s) written (new, or changed since the folder was last written)")
    for name, items in (refreshed.get("taken_out") or {}).items():
        whys = {}
        for t in items:
            whys[t["why"]] = whys.get(t["why"], 0) + 1
        lines.append(f"- {name}: {len(items)} verdict(s) taken out to be judged again ("
                     + "; ".join(f"{n} {w}" for w, n in whys.items()) + ")")
    (out / "rescore-summary.md").write_text("\n".join(lines) + "\n")
    if final:
        print("\n".join(lines))
