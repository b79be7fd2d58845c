"""Issue 26 evidence on a GPU: the hand-written generation corpus (tests/data/generations/), KernelBench's own
example solutions and adversarial unit-test kernels (from the checkout, benchmarks/kb_corpus.py) and a folder of
generations from benchmarks/kb_generations.py, scored by `kernelpilot suite --solutions` under kernelbench,
kernelbench-v0.1 and the default rules, within a time budget; every corpus verdict compared with
tests/data/generations/expected.json, the folder's with its expected.json; reports under $OUT. With
--published NAME=DIR (a folder benchmarks/published.py's layout: kb_leaderboard.py, cuda_l1.py), a published set
of model-written solutions too, with its claimed speedups (`--claims`): runs NAME-<rules> (--leaderboard DIR is
--published leaderboard=DIR). A plan entry
NAME~2 judges run NAME again from scratch in a folder of its own and lists every job whose status, KernelBench
status or reject rules changed between the two (stability). --kernelbench-original: folder-kernelbench-v0.1 on
KernelBench's original problem sizes (6500bbc), which v0.1's published scores were measured on.

Runs are resumable: call it again with the same --work and it continues each run where it stopped
(`kernelpilot suite --resume`; a complete run is not started again), in the order of --plan (PLAN: the corpus
and KernelBench's kernels under kernelbench, then under the default rules, then the folder under kernelbench,
then the rest). Each suite stops at the deadline (SIGINT; SIGKILL GRACE_S later) and the summary is rewritten
after every run, so a call cut at its limit keeps what it finished. On CPU, `--mode build --limit 3` smokes the
orchestration (no GPU; statuses then differ from the expected ones).

  python benchmarks/rescore_gpu.py --kernelbench .kb --out "$OUT" --budget 540
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from published import LAYOUT  # noqa: E402 - benchmarks/published.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
RULES = ("kernelbench", "kernelbench-v0.1", "kernelpilot")
HARNESS_FAILURES = ("timeout", "runtime_error")
GRACE_S = 25.0  # kept back from the budget for a suite to stop at the deadline (SIGINT, then SIGKILL)
# the order the runs go in, most useful first: each call of --budget seconds completes what it can of them and
# a later call with the same --work goes on (a complete run is not started again)
PLAN = ("corpus-kernelbench", "kb-kernelbench", "corpus-kernelpilot", "kb-kernelpilot", "folder-kernelbench",
        "corpus-kernelbench-v0.1", "kb-kernelbench-v0.1", "folder-kernelpilot", "folder-kernelbench-v0.1")
# the rule sets a published set (--published NAME=DIR) is scored under, as runs NAME-<rules>: the sets published so
# far were measured with KernelBench's original harness or one like it (tolerance 1e-2), ~ v0.1
PUBLISHED_RULES = ("kernelbench-v0.1", "kernelpilot", "kernelbench")
OWN_RUNS = ("corpus", "kb", "folder")


def _problems(levels_root: Path, manifest: dict) -> list[str]:
    return sorted({str(levels_root / f"{e['problem']}.py") for e in manifest["files"]})


def _planned_and_done(run: Path) -> tuple[int, int]:
    import sqlite3

    con = sqlite3.connect(run / "results.sqlite")
    try:
        return (con.execute("SELECT COUNT(*) FROM jobs").fetchone()[0], con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
    finally:
        con.close()


def _unplanned(run: Path, solutions: Path) -> int:
    """Generation files in ``solutions`` that the run's plan lacks (written after it started: --add-new plans them)."""
    import sqlite3

    con = sqlite3.connect(run / "results.sqlite")
    try:
        planned = {Path(c).name for (c,) in con.execute("SELECT candidate FROM jobs WHERE candidate IS NOT NULL")}
    finally:
        con.close()
    return sum(1 for f in Path(solutions).rglob("level_*_problem_*_sample_*_kernel.py") if f.name not in planned)


def _checkpoint(run: Path) -> None:
    """Fold SQLite's write-ahead log into results.sqlite (a killed suite leaves its last verdicts there), so the
    work folder can be carried to the next call as it is."""
    import sqlite3

    if (run / "results.sqlite").is_file():
        con = sqlite3.connect(run / "results.sqlite")
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()


def _default_sigint() -> None:  # in the child: a shell's background job inherits SIGINT ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def suite_command(name: str, problems: list[str], solutions: Path, rules: str, work: Path, checkout: Path,
                  mode: str = "benchmark", limit: int | None = None, extra: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    """The `kernelpilot suite` call for run ``name`` in ``work``: a new run, or the run resumed."""
    run = work / name
    if (run / "results.sqlite").is_file():
        # --add-new: a file added to the corpus or folder since the run started is judged too
        cmd = [sys.executable, "-m", "kernelpilot", "suite", "--resume", str(run), "--add-new", "--jsonl"]
    else:
        cmd = [sys.executable, "-m", "kernelpilot", "suite", *problems, "--solutions", str(solutions), "--rules", rules, "--out", str(run),
               "--kernelbench-checkout", str(checkout), "--mode", mode, "--jsonl", *extra]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    if mode == "benchmark" and "~" not in name:  # a repeat (~2) measures everything again
        # the same set's runs under other rule sets: their baselines of the same problem files serve this one
        for sibling in sorted(work.glob(f"{name.split('-')[0]}-*")):
            if sibling != run and "~" not in sibling.name and (sibling / "results.sqlite").is_file():
                cmd += ["--baselines-from", str(sibling)]
    return cmd


def run_suite(name: str, problems: list[str], solutions: Path, rules: str, work: Path, checkout: Path,
              deadline: float, mode: str = "benchmark", limit: int | None = None, extra: list[str] = ()) -> str:  # type: ignore[assignment]
    run = work / name
    if (run / "results.sqlite").is_file():
        planned, done = _planned_and_done(run)
        if done >= planned and not _unplanned(run, solutions):
            return f"complete ({done} of {planned})"
    left = deadline - time.monotonic() - GRACE_S
    if left < 30:
        return "skipped: no time left"
    cmd = suite_command(name, problems, solutions, rules, work, checkout, mode, limit, extra)
    note = ""
    with (work / f"{name}.log").open("a") as log:
        # its own process group: at the deadline SIGINT (the suite stores what finished and exits), and where it
        # is still waiting on a build after GRACE_S, SIGKILL for it and its workers (every verdict is already stored)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_default_sigint)
        try:
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            note = ", interrupted at the deadline"
            try:
                rc = proc.wait(timeout=GRACE_S - 5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
                note += ", killed after the grace"
    _checkpoint(run)
    if (run / "results.sqlite").is_file():
        planned, done = _planned_and_done(run)
        note += f", {done} of {planned} verdicts"
    return f"rc {rc}{note}"


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
            out["mismatches"].append({"file": e["file"], "job": r.job_key, "problems": problems, "summary": v.summary})
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


def redo_mismatches(run: Path, rules: str, manifest: dict) -> list[dict]:
    """Take the corpus verdicts that were not as expected out of ``run`` so that ``--resume`` judges them again
    (after a fix); each is kept, whole, in ``run/redone.jsonl`` and returned (the summary lists them)."""
    import sqlite3

    if not (run / "results.sqlite").is_file():
        return []
    found = compare_corpus(run, rules, manifest)
    jobs = [m["job"] for m in found["mismatches"]]
    if not jobs:
        return []
    con = sqlite3.connect(run / "results.sqlite")
    taken = []
    try:
        with con, (run / "redone.jsonl").open("a") as kept:
            for job in jobs:
                row = con.execute("SELECT status, verdict FROM verdicts WHERE job_key = ?", (job,)).fetchone()
                if row is None:
                    continue
                kept.write(json.dumps({"job": job, "status": row[0], "verdict": row[1], "redone_at": time.time()}) + "\n")
                con.execute("DELETE FROM verdicts WHERE job_key = ?", (job,))
                taken.append({"job": job, "earlier_status": row[0]})
    finally:
        con.close()
    return taken


def published_sets(p: argparse.ArgumentParser, given: list[str]) -> dict[str, Path]:
    """--published NAME=DIR (and --leaderboard DIR) as NAME -> folder, each checked to hold the layout."""
    sets: dict[str, Path] = {}
    for item in given:
        name, sep, folder = item.partition("=")
        if not sep or not name.replace("_", "").isalnum() or not name.isascii() or name in OWN_RUNS:
            p.error(f"--published {item}: expected NAME=DIR, NAME of letters, digits and underscores, not "
                    f"{', '.join(OWN_RUNS)}")
        d = Path(folder).expanduser().resolve()
        missing = [f for f in LAYOUT if not (d / f).exists()]
        if missing:
            p.error(f"--published {item}: {d} lacks {', '.join(missing)} (write it with benchmarks/kb_leaderboard.py "
                    "or benchmarks/cuda_l1.py)")
        if name in sets:
            p.error(f"--published: {name} given twice")
        sets[name] = d
    return sets


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
    for name, taken in (summary.get("redone") or {}).items():
        if taken:
            lines.append(f"- {name}: judged again after fixes: " + ", ".join(f"{t['job']} (was {t['earlier_status']})" for t in taken))
    (out / "rescore-summary.md").write_text("\n".join(lines) + "\n")
    if final:
        print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernelbench", required=True, help="a KernelBench checkout (root: src/kernelbench, KernelBench/level1..)")
    p.add_argument("--out", required=True, help="where the reports and comparisons go")
    p.add_argument("--work", help="the runs' folder, kept between calls (default: OUT/runs)")
    p.add_argument("--budget", type=float, default=540.0, help="seconds this call may spend in suites")
    p.add_argument("--only", help="score only the corpus, KernelBench's own examples and adversarial kernels (kb), the "
                   "folder, or the published set of that NAME")
    p.add_argument("--plan", type=lambda t: t.split(","), default=list(PLAN),
                   help=f"the runs, in order, comma-separated (default: {','.join(PLAN)}; with --published NAME=DIR "
                        f"also NAME-<rules> for {', '.join(PUBLISHED_RULES)})")
    p.add_argument("--published", action="append", default=[], metavar="NAME=DIR",
                   help="a published set in benchmarks/published.py's layout (KernelBench/, generations/, claims.csv, "
                   "manifest.json; written by kb_leaderboard.py or cuda_l1.py): the runs NAME-<rules> score it, its "
                   "claims beside the figures; NAME is letters, digits and underscores; repeat for more sets")
    p.add_argument("--leaderboard", metavar="DIR", help="the same as --published leaderboard=DIR")
    p.add_argument("--folder-problems", type=int, default=60, help="kb_generations.py --problems: the wrapper patterns "
                   "for this many problems, smallest first (read when the folder is first written)")
    p.add_argument("--folder-fallbacks", type=int, default=20, help="kb_generations.py --fallbacks")
    p.add_argument("--folder-elementwise", type=int, default=6, help="kb_generations.py --elementwise: the CUDA "
                   "patterns on this many level-1 elementwise problems (at today's sizes each costs KernelBench's "
                   "harness one 60-100 s draw of its inputs per suite; 6 keeps the folder over 200 files)")
    p.add_argument("--kernelbench-original", metavar="PATH", help="KernelBench's problem files at 6500bbc (the original "
                   "sizes, which v0.1's published scores were measured on): folder-kernelbench-v0.1 then scores a folder "
                   "of the same patterns written from them (generations-v0.1/), on them; without it, the folder of today's "
                   "files (and the suite's warning)")
    p.add_argument("--mode", choices=("build", "test", "benchmark"), default="benchmark",
                   help="how far each suite evaluates (build: no GPU, a CPU smoke of the orchestration)")
    p.add_argument("--limit", type=int, help="each suite call runs at most N pending jobs (a smoke; the rest stay "
                   "for the next call)")
    p.add_argument("--redo-mismatches", action="store_true", help="judge again the corpus verdicts that were not "
                   "as expected (after a fix; the earlier verdicts are kept in the run's redone.jsonl)")
    args = p.parse_args(argv)
    published = published_sets(p, args.published + ([f"leaderboard={args.leaderboard}"] if args.leaderboard else []))
    known = PLAN + tuple(f"{n}-{r}" for n in published for r in PUBLISHED_RULES)
    unknown = [n for n in args.plan if n.split("~", 1)[0] not in known]
    if unknown:
        p.error(f"--plan: unknown runs {', '.join(unknown)} (known: {', '.join(known)}; a published set's runs need "
                "--published NAME=DIR)")
    if args.only and args.only not in OWN_RUNS + tuple(published):
        p.error(f"--only: {args.only} is none of {', '.join(OWN_RUNS + tuple(published))}")
    deadline = time.monotonic() + args.budget
    checkout = Path(args.kernelbench).resolve()
    levels_root = checkout / "KernelBench" if (checkout / "KernelBench" / "level1").is_dir() else checkout
    out = Path(args.out)
    work = Path(args.work) if args.work else out / "runs"
    work.mkdir(parents=True, exist_ok=True)
    gen = work / "generations"
    folder_args = ["--problems", str(args.folder_problems), "--fallbacks", str(args.folder_fallbacks),
                   "--elementwise", str(args.folder_elementwise)]
    if not (gen / "expected.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kb_generations.py"), "--kernelbench", str(checkout),
                        "--out", str(gen), "--corpus", str(work / "corpus"), *folder_args], check=True)
    corpus_manifest = json.loads((work / "corpus" / "expected.json").read_text())
    folder_manifest = json.loads((gen / "expected.json").read_text())
    original = Path(args.kernelbench_original).resolve() if args.kernelbench_original else None
    gen01, original_manifest, original_root = gen, folder_manifest, levels_root
    if original is not None:
        original_root = original / "KernelBench" if (original / "KernelBench" / "level1").is_dir() else original
        gen01 = work / "generations-v0.1"
        if not (gen01 / "expected.json").is_file():
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kb_generations.py"), "--kernelbench", str(original),
                            "--out", str(gen01), "--problems", str(args.folder_problems), "--fallbacks",
                            str(args.folder_fallbacks)], check=True)  # every elementwise problem: small at these sizes
        original_manifest = json.loads((gen01 / "expected.json").read_text())
    summary: dict = {"calls": [], "corpus": {}, "folder": {}}
    from kb_corpus import EXPECTED, kernelbench_jobs

    kb_jobs = kernelbench_jobs(checkout, work / "kb")  # copied: problems/<key>.py, solutions/<key>.py
    summary["kb"] = {}
    manifests = {n: json.loads((d / "manifest.json").read_text()) for n, d in published.items()}
    if published:
        summary["published"] = {n: {} for n in published}
    for name in args.plan:  # NAME~2: the run NAME judged again from scratch, in a run folder of its own
        what, rules = name.split("~", 1)[0].split("-", 1)
        if args.only and what != args.only:
            continue
        extra: list[str] = []
        if what == "kb":
            manifest, solutions, problems = {}, work / "kb" / "solutions", [str(work / "kb" / "problems")]
        elif what in published:
            board = published[what]
            manifest, solutions = manifests[what], board / "generations"
            problems = sorted({str(board / "KernelBench" / f"{e['problem']}.py") for e in manifest["generations"]})
            extra = ["--claims", str(board / "claims.csv")]
        elif what == "folder" and rules == "kernelbench-v0.1" and original is not None:
            manifest, solutions = original_manifest, gen01
            problems = _problems(original_root, manifest)
        else:
            manifest, solutions = (corpus_manifest, work / "corpus") if what == "corpus" else (folder_manifest, gen)
            problems = _problems(levels_root, manifest)
        if args.redo_mismatches and what == "corpus":
            summary.setdefault("redone", {})[name] = redo_mismatches(work / name, rules, manifest)
        summary["calls"].append({name: run_suite(name, problems, solutions, rules, work, checkout, deadline, args.mode,
                                                 args.limit, extra)})
        run = work / name
        if not (run / "results.sqlite").is_file():
            continue
        subprocess.run([sys.executable, "-m", "kernelpilot", "report", str(run), "--kernelbench-checkout", str(checkout), *extra],
                       stdout=subprocess.DEVNULL, check=False)
        dest = out / name
        dest.mkdir(parents=True, exist_ok=True)
        for f in ("report.md", "report.json", "speedup.png"):
            if (run / f).is_file():
                shutil.copyfile(run / f, dest / f)
        key = rules
        if "~" in name:  # a repeat: compared with the first run too
            key = f"{rules}~{name.split('~', 1)[1]}"
            if (work / name.split("~", 1)[0] / "results.sqlite").is_file():
                summary.setdefault("repeats", {})[name] = compare_runs(work / name.split("~", 1)[0], run)
        if what in published:
            summary["published"][what][key] = compare_published(run, rules, manifest)
        elif what == "kb":
            summary["kb"][key] = compare_kb(run, rules, {k: sorted(EXPECTED.get(k, {"ok"})) for k, _, _ in kb_jobs})
        else:
            summary[what][key] = (compare_corpus if what == "corpus" else compare_folder)(run, rules, manifest)
        write_summary(out, summary)
    write_summary(out, summary, final=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
