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
from rescore_compare import (compare_corpus, compare_folder, compare_kb, compare_published,  # noqa: E402
                             compare_runs, write_summary)
from rescore_refresh import refresh_corpus, refresh_folder, take_out  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RULES = ("kernelbench", "kernelbench-v0.1", "kernelpilot")
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


def _planned_and_done(run: Path, samples: list[int] | None = None) -> tuple[int, int]:
    """Jobs planned and judged in ``run`` (of ``samples`` only, when given)."""
    import sqlite3

    where, args = ("WHERE sample IN (%s)" % ",".join("?" * len(samples)), samples) if samples else ("", [])
    con = sqlite3.connect(run / "results.sqlite")
    try:
        return (con.execute(f"SELECT COUNT(*) FROM jobs {where}", args).fetchone()[0],
                con.execute(f"SELECT COUNT(*) FROM verdicts {where}", args).fetchone()[0])
    finally:
        con.close()


def _unplanned(run: Path, solutions: Path) -> int:
    """Generation files in ``solutions`` that the run's plan lacks (written after it started: --add-new plans them)."""
    import sqlite3

    from kernelpilot.suite.discovery import GENERATION_GLOB

    con = sqlite3.connect(run / "results.sqlite")
    try:
        planned = {Path(c).name for (c,) in con.execute("SELECT candidate FROM jobs WHERE candidate IS NOT NULL")}
    finally:
        con.close()
    return sum(1 for f in Path(solutions).rglob(GENERATION_GLOB) if f.name not in planned)


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
                  mode: str = "benchmark", limit: int | None = None, extra: list[str] = (),  # type: ignore[assignment]
                  samples: list[int] | None = None) -> list[str]:
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
    if samples:
        cmd += ["--samples", ",".join(map(str, samples))]
    if mode == "benchmark" and "~" not in name:  # a repeat (~2) measures everything again
        # the same set's runs under other rule sets: their baselines of the same problem files serve this one
        for sibling in sorted(work.glob(f"{name.split('-')[0]}-*")):
            if sibling != run and "~" not in sibling.name and (sibling / "results.sqlite").is_file():
                cmd += ["--baselines-from", str(sibling)]
    return cmd


def run_suite(name: str, problems: list[str], solutions: Path, rules: str, work: Path, checkout: Path,
              deadline: float, mode: str = "benchmark", limit: int | None = None, extra: list[str] = (),  # type: ignore[assignment]
              samples: list[int] | None = None) -> str:
    run = work / name
    if (run / "results.sqlite").is_file():
        planned, done = _planned_and_done(run, samples)
        if done >= planned and not _unplanned(run, solutions):
            return f"complete ({done} of {planned}{f', samples {samples}' if samples else ''})"
    left = deadline - time.monotonic() - GRACE_S
    if left < 30:
        return "skipped: no time left"
    cmd = suite_command(name, problems, solutions, rules, work, checkout, mode, limit, extra, samples)
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
    p.add_argument("--published-samples", metavar="S,S", type=lambda t: [int(x) for x in t.split(",") if x.strip()],
                   help="a published set's runs judge only these samples (0: the one KernelBench scores); the corpus, "
                        "the folders and KernelBench's examples run whole")
    p.add_argument("--redo-mismatches", action="store_true", help="judge again the corpus and folder verdicts that "
                   "were not as expected (after a fix; the earlier verdicts are kept in the run's redone.jsonl)")
    p.add_argument("--refresh-only", action="store_true", help="bring the work folder up to today's files (generation "
                   "folders, corpus copy; verdicts of changed files taken out, with --redo-mismatches those not as "
                   "expected too) and stop: no GPU needed, run it here before carrying the work folder")
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
    out.mkdir(parents=True, exist_ok=True)
    gen = work / "generations"
    folder_args = ["--problems", str(args.folder_problems), "--fallbacks", str(args.folder_fallbacks),
                   "--elementwise", str(args.folder_elementwise)]
    original = Path(args.kernelbench_original).resolve() if args.kernelbench_original else None
    # the folders and the corpus copy as today's sources write them; verdicts of files that changed are taken out
    changed = {"corpus": refresh_corpus(work / "corpus")}
    roots = {"corpus": levels_root}
    folders = {"corpus": work / "corpus"}
    # the generated folder is written only when a run of the plan judges it (writing it sizes 60+ problems)
    if args.only in (None, "folder") and any(n.split("~", 1)[0].startswith("folder-") for n in args.plan):
        changed["folder"], roots["folder"], folders["folder"] = refresh_folder(gen, checkout, folder_args), levels_root, gen
    if original is not None:  # folder-kernelbench-v0.1 on the original sizes, every elementwise problem: small there
        folders["folder-v0.1"] = work / "generations-v0.1"
        roots["folder-v0.1"] = original / "KernelBench" if (original / "KernelBench" / "level1").is_dir() else original
        changed["folder-v0.1"] = refresh_folder(folders["folder-v0.1"], original, [
            "--problems", str(args.folder_problems), "--fallbacks", str(args.folder_fallbacks)])
    manifests = {k: json.loads((d / "expected.json").read_text()) for k, d in folders.items()}
    summary: dict = {"calls": [], "corpus": {}, "folder": {}, "kb": {}}

    def source_of(run_name: str) -> str | None:
        """Which of ``folders`` a run of ours judges (None: KernelBench's examples, a published set)."""
        what, rules = run_name.split("~", 1)[0].split("-", 1)
        if what == "folder":
            return "folder-v0.1" if rules == "kernelbench-v0.1" and original is not None else "folder"
        return "corpus" if what == "corpus" else None

    taken: dict[str, list[dict]] = {}
    for run in sorted(d for d in work.iterdir() if (d / "results.sqlite").is_file()):
        key = source_of(run.name)
        if key is None or key not in folders:
            continue
        taken[run.name] = take_out(run, set(changed[key] or ()), "its file changed since it was judged")
        rules = run.name.split("~", 1)[0].split("-", 1)[1]
        if args.redo_mismatches and key == "corpus":  # a repeat's too, as before
            found = compare_corpus(run, rules, manifests[key])
            taken[run.name] += take_out(run, {m["candidate"] for m in found["mismatches"]}, "not as expected")
        elif args.redo_mismatches and "~" not in run.name:
            found = compare_folder(run, rules, manifests[key])
            redo = {u["file"] for u in found["unexpected"]} | {u["file"] for u in found["harness_failures"]}
            taken[run.name] += take_out(run, redo, "not as expected")
    summary["refreshed"] = {"changed_files": {k: v for k, v in changed.items() if v}, "taken_out": {k: v for k, v in taken.items() if v}}
    if args.refresh_only:
        write_summary(out, summary, final=True)
        return 0
    from kb_corpus import EXPECTED, kernelbench_jobs

    kb_jobs = kernelbench_jobs(checkout, work / "kb")  # copied: problems/<key>.py, solutions/<key>.py
    boards = {n: json.loads((d / "manifest.json").read_text()) for n, d in published.items()}
    if published:
        summary["published"] = {n: {} for n in published}
    for name in args.plan:  # NAME~2: the run NAME judged again from scratch, in a run folder of its own
        what, rules = name.split("~", 1)[0].split("-", 1)
        if args.only and what != args.only:
            continue
        extra: list[str] = []
        samples: list[int] | None = None
        if what == "kb":
            manifest, solutions, problems = {}, work / "kb" / "solutions", [str(work / "kb" / "problems")]
        elif what in published:
            board = published[what]
            manifest, solutions = boards[what], board / "generations"
            problems = sorted({str(board / "KernelBench" / f"{e['problem']}.py") for e in manifest["generations"]})
            extra = ["--claims", str(board / "claims.csv")]
            samples = args.published_samples
        else:
            key = source_of(name)
            manifest, solutions = manifests[key], folders[key]
            problems = _problems(roots[key], manifest)
        summary["calls"].append({name: run_suite(name, problems, solutions, rules, work, checkout, deadline, args.mode,
                                                 args.limit, extra, samples)})
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
