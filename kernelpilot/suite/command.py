"""``kernelpilot suite`` and ``kernelpilot report``: their arguments and implementations (cli.py registers them).

This module's top level imports only the standard library: ``kernelpilot --help`` stays fast.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any, Callable

SUITE_HELP = """\
Score many problems: every candidate gets the same verdict as `kernelpilot eval`, one row per verdict in
RUN/results.sqlite (kept as each arrives: Ctrl-C or kill -9 loses none; --resume RUN goes on where it
stopped), then a report (RUN/report.md, report.json, speedup.png). Builds run on every core ahead of the
GPUs; each GPU has one worker and times one candidate at a time.

PROBLEMS: a folder of KernelBench-format problem files (or of folders with problem.py), a KernelBench
checkout (level1/ level2/ level3/ become levels), or problem files.
Candidates: --solutions DIR (<problem>.py or <problem>/ per problem, or KernelBench's
level_<L>_problem_<ID>_sample_<S>_kernel.py samples), or an agent session per problem (--model, --replay).

The plan: every job of PROBLEMS, stored when the run starts and never changed (--resume included; with
--add-new a resume also plans the files added to the solutions folder since, the rest kept as it is). --levels,
--problems, --samples and --limit choose which of its jobs without a verdict this call runs; the others stay "not run
yet" (failures in every rate over all problems, shown apart; the report says the run is incomplete) until a
later `kernelpilot suite --resume RUN` runs them. For example:
  kernelpilot suite KernelBench --solutions runs/m --out kb --levels 1 --limit 20   plan all levels, run 20 level-1 jobs
  kernelpilot suite --resume kb --problems 'level1/2*,level2/5,3/7'                  then these problems' pending jobs
  kernelpilot suite KernelBench --solutions runs/m --out kb --samples 0              sample 0 of every problem first"""


def _index_list(what: str, example: str) -> Callable[[str], list[int]]:
    """An argparse type: a comma-separated list of non-negative integers (``what``, e.g. ``example``)."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            values = []
        if not values or any(v < 0 for v in values):
            raise argparse.ArgumentTypeError(f"{text!r} is not a list of {what}; use e.g. {example}")
        return values

    return parse


_gpus = _index_list("GPU indices", "0 or 0,1")
_levels = _index_list("KernelBench levels", "1 or 1,2")
_samples = _index_list("sample indices", "0 or 0,1")


def _problem_items(text: str) -> list[str]:
    from kernelpilot.suite.discovery import parse_problem_items

    try:
        return parse_problem_items(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parsers(sub: Any, fmt: Any, duration: Any, positive_int: Any, positive_float: Any) -> None:
    """Add ``suite`` and ``report`` to the CLI's subparsers (the CLI's own argument types are passed in)."""
    s = sub.add_parser("suite", prog="kernelpilot suite", help="score a suite of problems", formatter_class=fmt,
                       description=SUITE_HELP)
    s.add_argument("problems", metavar="PROBLEMS", nargs="*", help="problem folder, KernelBench checkout, or problem files")
    s.add_argument("--out", metavar="RUN", help="the run folder (default: kernelpilot-runs/<date-time>)")
    s.add_argument("--resume", metavar="RUN", help="continue the run in RUN: evaluate only what has no verdict yet (its plan, "
                   "mode and candidates are the run's own; --levels, --problems, --samples, --limit choose among its pending jobs)")
    s.add_argument("--add-new", action="store_true",
                   help="with --resume: plan the files added to the run's --solutions folder since it started (a folder "
                        "still being generated, a corpus grown); jobs already planned are kept as they are")
    s.add_argument("--solutions", metavar="DIR", help="existing candidates, no LLM")
    s.add_argument("--model", metavar="MODEL", help="agent mode: a headless agent session per problem with this litellm model")
    s.add_argument("--replay", metavar="FILE", help="agent mode with every session replaying FILE (demos, tests)")
    s.add_argument("--api-base", metavar="URL", help="base URL of a self-hosted model server")
    s.add_argument("--max-turns", type=positive_int, metavar="N", help="per problem: stop its session after N turns")
    s.add_argument("--max-tokens", type=positive_int, metavar="N", help="per problem: stop after N tokens")
    s.add_argument("--budget-usd", type=positive_float, metavar="USD", help="per problem: stop when its session has cost USD")
    s.add_argument("--max-wall", type=duration, metavar="DURATION", help="per problem: stop after this wall time (90s, 30m, 2h)")
    s.add_argument("--suite-budget-usd", type=positive_float, metavar="USD",
                   help="stop starting sessions once all of them have cost USD (the rest count as failures)")
    s.add_argument("--sessions", type=positive_int, metavar="N", help="agent sessions at once (default: 2 per GPU)")
    s.add_argument("--mode", choices=("build", "test", "benchmark"), default="benchmark", help="how far to evaluate (default: benchmark)")
    from kernelpilot.rules import RULE_NAMES

    s.add_argument("--kb-precision", choices=("fp32", "fp16", "bf16"),
                   help="with a KernelBench preset: the precision its harness casts inputs and models to (default fp32)")
    s.add_argument("--rules", choices=RULE_NAMES, default="kernelpilot",
                   help="kernelbench: PyTorch ops allowed in ModelNew (each listed as a warning), every other check as strict")
    s.add_argument("--levels", type=_levels, metavar="L,L",
                   help="this call runs only pending jobs of these KernelBench levels, e.g. 1,2 (the plan keeps every level; "
                        "to plan one level only, pass its folder: KernelBench/KernelBench/level1)")
    s.add_argument("--problems", dest="select", type=_problem_items, metavar="PATTERN",
                   help="this call runs only pending jobs of these problems: a glob on problem keys ('level1/2*', quoted) or "
                        "a comma-separated list of keys, stems or KernelBench ids (level1/23_Softmax,level2/5,1/23; an id "
                        "alone, 23, matches it in every level)")
    s.add_argument("--samples", type=_samples, metavar="S,S",
                   help="this call runs only pending jobs of these sample indices, e.g. 0 (the sample KernelBench "
                        "scores: a large published set's sample-0 view first, the other samples by a later --resume)")
    s.add_argument("--limit", type=positive_int, metavar="N",
                   help="run at most N of the chosen pending jobs this call, in plan order (the rest stay for --resume)")
    s.add_argument("--gpus", type=_gpus, metavar="I,J", help="local GPUs to use (default: every visible one)")
    s.add_argument("--build-workers", type=positive_int, metavar="N", help="parallel builds (default: one per core)")
    s.add_argument("--baselines", choices=("shared", "interleaved"),
                   help="benchmark mode: shared (default) measures eager and torch.compile once per problem and GPU, "
                        "off the GPU slot, and times each candidate beside eager; interleaved compiles and times "
                        "torch.compile beside every candidate in its slot")
    s.add_argument("--baselines-from", action="append", metavar="RUN",
                   help="benchmark mode: take a problem's shared baselines from this earlier run on this machine where "
                        "they match (same problem file, timing settings and GPU, as --resume would reuse them); "
                        "repeatable. For re-scoring one folder under several rule sets in one session")
    s.add_argument("--baseline-workers", type=positive_int, metavar="N",
                   help="processes compiling and timing the shared baselines, per GPU (default: a third of the cores, at most 6)")
    s.add_argument("--ray", metavar="auto|ADDRESS", help="one Ray actor per GPU of a Ray cluster (needs the `ray` extra)")
    s.add_argument("--trials", type=positive_int, metavar="N", help="correctness trials per candidate (default 5)")
    s.add_argument("--timeout", type=positive_float, metavar="SECONDS", help="limit for each build or evaluation step")
    s.add_argument("--jsonl", action="store_true", help="one JSON line per event instead of the progress bar")
    _add_rescore_args(s)
    s.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help=argparse.SUPPRESS)  # tests of kernelpilot itself

    r = sub.add_parser("report", prog="kernelpilot report", help="the report of a suite run", formatter_class=fmt, description=(
        "Write RUN/report.md, report.json and speedup.png from RUN/results.sqlite and print the markdown."))
    r.add_argument("run", metavar="RUN", help="the run folder of `kernelpilot suite`")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_rescore_args(r)


def _add_rescore_args(p: Any) -> None:
    p.add_argument("--claims", metavar="FILE", type=Path,
                   help="a CSV of claimed speedups (header: problem or level,problem_id; sample; claimed_x_eager and/or "
                        "claimed_x_compile as ratios; gpu), each put beside the measured one (kept in the run)")
    p.add_argument("--kernelbench-checkout", metavar="PATH", type=Path,
                   help="the KernelBench checkout whose src/kernelbench/kernel_static_checker.py runs on every solution "
                        "(default: the checkout the problems came from; kept in the run)")


def _fail(message: str) -> int:
    print(f"kernelpilot: {message}", file=sys.stderr)
    return 2


def _overrides(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, Any]:
    """The suite's flags that override every problem's project config (kept in the run for --resume)."""
    if "overrides" in meta:
        return dict(meta["overrides"])
    overrides: dict[str, Any] = {"rules": args.rules, "device": args.device}
    if getattr(args, "kb_precision", None):
        overrides["kb_precision"] = args.kb_precision
    if args.device == "cpu":
        overrides["confine"] = False
    if args.trials:
        overrides["trials"] = args.trials
    if args.timeout:
        overrides.update(build_timeout_s=args.timeout, test_timeout_s=args.timeout,
                         benchmark_timeout_s=max(args.timeout, 600.0))
    return overrides


class ProblemSettings:
    """Each problem's EvalSettings as `kernelpilot eval` would use them: the project config found from the
    problem's folder (tolerances, extra shapes, allowed libraries...), then the suite's flags."""

    def __init__(self, overrides: dict[str, Any]) -> None:
        from kernelpilot.evaluation import EvalSettings

        self.overrides = overrides
        self.base = EvalSettings(**overrides)
        self._cache: dict[Path, Any] = {}

    def __call__(self, job: Any) -> Any:
        from kernelpilot.config import load_config
        from kernelpilot.evaluation import EvalSettings

        folder = Path(job.problem.path).parent
        if folder not in self._cache:
            self._cache[folder] = EvalSettings.from_config(load_config(folder), **self.overrides)
        return self._cache[folder]


def _make_pool(args: argparse.Namespace, settings: Any, run_dir: Path, mode: str, jobs: list[Any] = ()) -> Any:  # type: ignore[assignment]
    from kernelpilot.suite.pool import LocalPool, default_build_workers, job_roots

    if args.ray:
        from kernelpilot.suite.ray_pool import RayPool

        return RayPool(settings, "auto" if args.ray == "auto" else args.ray, run_dir / "work",
                       build_workers=args.build_workers or default_build_workers())

    gpus: list[int | None] = list(args.gpus) if args.gpus else []
    if not gpus and mode != "build" and settings.device == "cuda":
        from kernelpilot.cli import gpu_count

        gpus = list(range(gpu_count()))
        if not gpus:
            raise RuntimeError(f"`kernelpilot suite --mode {mode}` needs a CUDA GPU and none is visible; "
                               "use --mode build to only compile, or --ray ADDRESS for a cluster's GPUs.")
    # every problem and solution, and the run folder (agent mode's per-problem repositories)
    paths = [Path(j.problem.path) for j in jobs] + [Path(j.candidate) for j in jobs if j.candidate is not None]
    paths.append(run_dir)
    slots = gpus or [None]
    services = None
    if mode == "benchmark" and settings.device == "cuda" and (getattr(args, "baselines", None) or "shared") == "shared":
        import os

        from kernelpilot.evaluation.baselines.service import BaselineService
        from kernelpilot.suite.baseline_store import BaselineStore

        store = BaselineStore(run_dir, [Path(p) for p in getattr(args, "baselines_from", None) or []])
        workers = args.baseline_workers or max(1, min(6, (os.cpu_count() or 3) // 3))
        services = [BaselineService(settings, run_dir / "work" / f"baselines-gpu{g if g is not None else i}", gpu=g,
                                    processes=workers, cache=store) for i, g in enumerate(slots)]
    return LocalPool(settings, slots, run_dir / "work", build_workers=args.build_workers,
                     roots=job_roots(paths), warm=mode != "build", baselines=services)


def _discover(args: argparse.Namespace, plan_levels: list[int] | None) -> list[Any]:
    """Every job of the run's problems (the plan): one per problem in agent mode, else one per solution sample."""
    from kernelpilot.suite import discovery

    refs = discovery.discover_problems([Path(p) for p in args.problems], plan_levels)
    if args.model or args.replay:
        return [discovery.Job(r, None, 0) for r in refs]
    return discovery.discover_jobs(refs, Path(args.solutions))


def _added(args: argparse.Namespace, store: Any, plan_levels: list[int] | None) -> list[Any]:
    """--add-new: the solutions folder's jobs that the stored plan lacks planned (Store.extend; on stderr: which);
    the plan after."""
    new = store.extend(_discover(args, plan_levels))
    print(f"kernelpilot: --add-new: {len(new)} new file(s) in {args.solutions} planned"
          + (f" ({', '.join(j.key for j in new[:5])}{', ...' if len(new) > 5 else ''})" if new else ""), file=sys.stderr)
    return store.planned_jobs()


def run_suite(args: argparse.Namespace) -> int:
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.suite import discovery
    from kernelpilot.suite.store import DB_NAME, Store

    levels, select, limit = getattr(args, "levels", None), getattr(args, "select", None), getattr(args, "limit", None)
    samples = getattr(args, "samples", None)
    if getattr(args, "claims", None) is not None:  # a malformed claims file stops the call before anything runs
        from kernelpilot.suite.claims import parse_claims

        try:
            parse_claims(args.claims)
        except KernelpilotError as exc:
            return _fail(str(exc))
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / DB_NAME).is_file():
            return _fail(f"{run_dir} is not a suite run (no {DB_NAME}); pass the RUN folder a `kernelpilot suite` made.")
        if args.problems:
            return _fail("--resume continues the run's own plan and takes no PROBLEMS; choose among its pending jobs "
                         "with --problems PATTERN, --levels L,L, --samples S,S or --limit N.")
        store = Store(run_dir)
        meta = store.meta()
        if not meta:
            store.close()
            return _fail(f"{run_dir} holds no plan (its first call stopped before planning); start a new run with "
                         "`kernelpilot suite PROBLEMS ... --out OTHER`.")
        if getattr(args, "add_new", False) and not meta.get("solutions"):
            store.close()
            return _fail("--add-new looks for new files in the run's --solutions folder; this run has none (an agent "
                         "run plans one job per problem).")
        # a resumed run keeps what it started with; "levels" in the meta is the plan's own filter (runs made
        # before --levels only chose jobs), never this call's --levels
        for key in ("problems", "solutions", "mode", "model", "replay"):
            setattr(args, key, meta.get(key))
        args.baselines = args.baselines or meta.get("baselines") or "shared"
        try:
            jobs = store.planned_jobs()
            if not jobs:  # stopped between its meta and its plan: plan now, as its first call would have
                jobs = _discover(args, meta.get("levels"))
                store.plan(jobs)
            elif getattr(args, "add_new", False):
                jobs = _added(args, store, meta.get("levels"))
            selection = discovery.select_jobs(jobs, store.finished(), levels, select, limit, samples)
            per_problem = ProblemSettings(_overrides(args, meta))
        except KernelpilotError as exc:
            store.close()
            return _fail(str(exc))
    else:
        if getattr(args, "add_new", False):
            return _fail("--add-new extends a run's plan: use it with --resume RUN (a new run plans every file anyway).")
        if not args.problems:
            return _fail("no problems given; pass a problem folder, a KernelBench checkout or problem files.")
        if not (args.solutions or args.model or args.replay):
            return _fail("no candidates: pass --solutions DIR (existing solutions) or --model MODEL (an agent session per problem).")
        run_dir = Path(args.out or Path("kernelpilot-runs") / dt.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
        if (run_dir / DB_NAME).exists():
            return _fail(f"{run_dir} already holds a run; continue it with --resume {run_dir} or choose another --out.")
        meta: dict[str, Any] = {}
        try:  # everything is checked before the run folder is made: a refused call leaves nothing behind
            jobs = _discover(args, None)
            selection = discovery.select_jobs(jobs, set(), levels, select, limit, samples)
            per_problem = ProblemSettings(_overrides(args, meta))
        except KernelpilotError as exc:
            return _fail(str(exc))
        store = Store(run_dir)
        store.set_meta(problems=[str(Path(p).resolve()) for p in args.problems], solutions=args.solutions and str(Path(args.solutions).resolve()),
                       mode=args.mode, levels=None, model=args.model, replay=args.replay, rules=per_problem.base.rules,
                       overrides=per_problem.overrides, source=" ".join(args.problems),
                       baselines=args.baselines or "shared",
                       kernelbench=discovery.kernelbench_sources([Path(p) for p in args.problems]),
                       problem_files=_problem_files(jobs, per_problem.base))
        store.plan(jobs)
    settings = per_problem.base
    files = store.meta().get("problem_files") or {}
    if files.get("warning") and not args.jsonl:
        print(f"warning: {files['warning']}")
    agent = bool(args.model or args.replay)
    store.begin(sys.argv)
    from kernelpilot.suite.progress import Progress
    from kernelpilot.suite.runner import run_jobs

    todo = selection.todo
    if not args.jsonl and (len(todo) < selection.pending):
        print(f"this call runs {len(todo)} of the run's {selection.pending} jobs without a verdict (--levels, --problems, "
              f"--samples, --limit); the other {selection.left} stay not run yet.")
    progress = Progress(selection.already + len(todo), already=selection.already, jsonl=args.jsonl,
                        planned=len(jobs), left=selection.left)
    pool: Any = None
    interrupted = False
    try:
        # a pool only for work that needs one: jobs without a candidate are stored at once as missing
        if todo and (agent or any(j.candidate is not None for j in todo)):
            pool = _make_pool(args, settings, run_dir, args.mode, todo)
        if agent and todo:
            import asyncio

            from kernelpilot.suite.agent_mode import run_agent_suite

            slots = len(getattr(pool, "stats", []) or getattr(pool, "actors", [])) or 1
            asyncio.run(run_agent_suite([j.problem for j in todo], store, run_dir, args, pool, progress.result,
                                        concurrency=args.sessions or 2 * slots))
        elif not agent:
            run_jobs(store, pool, todo, args.mode, progress.result, settings_for=per_problem)
    except KeyboardInterrupt:
        interrupted = True
    except (KernelpilotError, RuntimeError, ImportError) as exc:
        progress.close()
        store.end()
        store.close()
        return _fail(f"{exc}" + (" (install it with pip install 'kernelpilot[ray]')" if isinstance(exc, ImportError) else ""))
    finally:
        if pool is not None:
            pool.close(cancel=interrupted)
    store.end()
    store.close()
    progress.close(run=str(run_dir), interrupted=interrupted)
    from kernelpilot.suite.report import write_report

    report, text = write_report(run_dir, claims=getattr(args, "claims", None), checkout=getattr(args, "kernelbench_checkout", None))
    if args.jsonl:
        progress.event("report", path=str(run_dir / "report.md"), overall=report["views"]["sample0"]["overall"],
                       throughput=report["throughput"], complete=report["complete"], not_run_yet=report["not_run_yet"])
    else:
        print(text)
        print(f"run folder: {run_dir}  (report: {run_dir / 'report.md'}; continue with --resume {run_dir})")
    if interrupted:
        print(f"kernelpilot: interrupted; every finished verdict is stored. Continue with `kernelpilot suite --resume {run_dir}`.",
              file=sys.stderr)
        return 130
    return 0


def run_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    if not (run_dir / "results.sqlite").is_file():
        return _fail(f"{run_dir} is not a suite run (no results.sqlite); pass the RUN folder a `kernelpilot suite` made.")
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.suite.report import write_report

    try:
        report, text = write_report(run_dir, claims=getattr(args, "claims", None), checkout=getattr(args, "kernelbench_checkout", None))
    except KernelpilotError as exc:
        return _fail(str(exc))
    if args.json:
        import json

        print(json.dumps(report, indent=2, default=str))
    else:
        print(text)
    return 0


def _problem_files(jobs: list[Any], settings: Any) -> dict[str, Any]:
    """Which KernelBench commit the problem files match (kernelpilot.kb_files), and a warning when a
    KernelBench preset's published scores were measured on other files."""
    from kernelpilot.kb_files import check

    harness = settings.ruleset.harness
    return check(sorted({j.problem.path for j in jobs}), harness.version if harness is not None else None)
