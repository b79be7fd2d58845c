"""``kernelpilot suite`` and ``kernelpilot report``: their arguments and implementations (cli.py registers them).

This module's top level imports only the standard library: ``kernelpilot --help`` stays fast.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

SUITE_HELP = """\
Score many problems: every candidate gets the same verdict as `kernelpilot eval`, one row per verdict in
RUN/results.sqlite (kept as each arrives: Ctrl-C or kill -9 loses none; --resume RUN goes on where it
stopped), then a report (RUN/report.md, report.json, speedup.png). Builds run on every core ahead of the
GPUs; each GPU has one worker and times one candidate at a time.

PROBLEMS: a folder of KernelBench-format problem files (or of folders with problem.py), a KernelBench
checkout (level1/ level2/ level3/ become levels), or problem files.
Candidates: --solutions DIR (<problem>.py or <problem>/ per problem, or KernelBench's
level_<L>_problem_<ID>_sample_<S>_kernel.py samples), or an agent session per problem (--model, --replay)."""


def _gpus(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of GPU indices; use e.g. 0 or 0,1")
    return values


def add_parsers(sub: Any, fmt: Any, duration: Any, positive_int: Any, positive_float: Any) -> None:
    """Add ``suite`` and ``report`` to the CLI's subparsers (the CLI's own argument types are passed in)."""
    s = sub.add_parser("suite", prog="kernelpilot suite", help="score a suite of problems", formatter_class=fmt,
                       description=SUITE_HELP)
    s.add_argument("problems", metavar="PROBLEMS", nargs="*", help="problem folder, KernelBench checkout, or problem files")
    s.add_argument("--out", metavar="RUN", help="the run folder (default: kernelpilot-runs/<date-time>)")
    s.add_argument("--resume", metavar="RUN", help="continue the run in RUN: evaluate only what has no verdict yet")
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
    s.add_argument("--rules", choices=("kernelpilot", "kernelbench"), default="kernelpilot",
                   help="kernelbench: PyTorch ops allowed in ModelNew (each listed as a warning), every other check as strict")
    s.add_argument("--levels", type=_gpus, metavar="L,L", help="only these KernelBench levels, e.g. 1,2")
    s.add_argument("--gpus", type=_gpus, metavar="I,J", help="local GPUs to use (default: every visible one)")
    s.add_argument("--build-workers", type=positive_int, metavar="N", help="parallel builds (default: one per core)")
    s.add_argument("--ray", metavar="auto|ADDRESS", help="one Ray actor per GPU of a Ray cluster (needs the `ray` extra)")
    s.add_argument("--trials", type=positive_int, metavar="N", help="correctness trials per candidate (default 5)")
    s.add_argument("--timeout", type=positive_float, metavar="SECONDS", help="limit for each build or evaluation step")
    s.add_argument("--jsonl", action="store_true", help="one JSON line per event instead of the progress bar")
    s.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help=argparse.SUPPRESS)  # tests of kernelpilot itself

    r = sub.add_parser("report", prog="kernelpilot report", help="the report of a suite run", formatter_class=fmt, description=(
        "Write RUN/report.md, report.json and speedup.png from RUN/results.sqlite and print the markdown."))
    r.add_argument("run", metavar="RUN", help="the run folder of `kernelpilot suite`")
    r.add_argument("--json", action="store_true", help="print the report as JSON")


def _fail(message: str) -> int:
    print(f"kernelpilot: {message}", file=sys.stderr)
    return 2


def _overrides(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, Any]:
    """The suite's flags that override every problem's project config (kept in the run for --resume)."""
    if "overrides" in meta:
        return dict(meta["overrides"])
    overrides: dict[str, Any] = {"rules": args.rules, "device": args.device}
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
    return LocalPool(settings, gpus or [None], run_dir / "work", build_workers=args.build_workers,
                     roots=job_roots(paths), warm=mode != "build")


def run_suite(args: argparse.Namespace) -> int:
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.suite import discovery
    from kernelpilot.suite.store import Store

    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "results.sqlite").is_file():
            return _fail(f"{run_dir} is not a suite run (no results.sqlite); pass the RUN folder a `kernelpilot suite` made.")
    else:
        if not args.problems:
            return _fail("no problems given; pass a problem folder, a KernelBench checkout or problem files.")
        if not (args.solutions or args.model or args.replay):
            return _fail("no candidates: pass --solutions DIR (existing solutions) or --model MODEL (an agent session per problem).")
        run_dir = Path(args.out or Path("kernelpilot-runs") / dt.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
        if (run_dir / "results.sqlite").exists():
            return _fail(f"{run_dir} already holds a run; continue it with --resume {run_dir} or choose another --out.")
    store = Store(run_dir)
    meta = store.meta()
    if meta:  # a resumed run keeps what it started with
        for key in ("problems", "solutions", "mode", "levels", "model", "replay"):
            setattr(args, key, meta.get(key))
    agent = bool(args.model or args.replay)
    try:
        refs = discovery.discover_problems([Path(p) for p in args.problems], args.levels)
        jobs = [discovery.Job(r, None, 0) for r in refs] if agent else discovery.discover_jobs(refs, Path(args.solutions))
        per_problem = ProblemSettings(_overrides(args, meta))
        settings = per_problem.base
    except KernelpilotError as exc:
        store.close()
        return _fail(str(exc))
    if not meta:
        store.set_meta(problems=[str(Path(p).resolve()) for p in args.problems], solutions=args.solutions and str(Path(args.solutions).resolve()),
                       mode=args.mode, levels=args.levels, model=args.model, replay=args.replay, rules=settings.rules,
                       overrides=per_problem.overrides, source=" ".join(args.problems))
    store.plan(jobs)
    store.begin(sys.argv)
    from kernelpilot.suite.progress import Progress
    from kernelpilot.suite.runner import pending_jobs, run_jobs

    todo = pending_jobs(store, jobs)
    progress = Progress(len(jobs), already=len(jobs) - len(todo), jsonl=args.jsonl)
    pool: Any = None
    interrupted = False
    try:
        pool = _make_pool(args, settings, run_dir, args.mode, jobs)
        if agent:
            import asyncio

            from kernelpilot.suite.agent_mode import run_agent_suite

            slots = len(getattr(pool, "stats", []) or getattr(pool, "actors", [])) or 1
            asyncio.run(run_agent_suite(refs, store, run_dir, args, pool, progress.result,
                                        concurrency=args.sessions or 2 * slots))
        else:
            run_jobs(store, pool, jobs, args.mode, progress.result, settings_for=per_problem)
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

    report, text = write_report(run_dir)
    if args.jsonl:
        progress.event("report", path=str(run_dir / "report.md"), overall=report["views"]["sample0"]["overall"],
                       throughput=report["throughput"])
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
    from kernelpilot.suite.report import write_report

    report, text = write_report(run_dir)
    if args.json:
        import json

        print(json.dumps(report, indent=2, default=str))
    else:
        print(text)
    return 0
