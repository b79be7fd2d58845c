"""``kernelpilot suite`` and ``kernelpilot report``: their implementations (suite/arguments.py defines their
arguments)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.code_version import running_version
from kernelpilot.config import load_config
from kernelpilot.errors import KernelpilotError
from kernelpilot.kb_files import check
from kernelpilot.machine import gpu_count
from kernelpilot.suite import discovery
from kernelpilot.suite.agent_mode import run_agent_suite
from kernelpilot.suite.baseline_store import BaselineStore
from kernelpilot.suite.claims import parse_claims
from kernelpilot.suite import cores
from kernelpilot.suite.pool import LocalPool, default_build_workers, job_roots
from kernelpilot.suite.progress import Progress
from kernelpilot.suite.ray_pool import RayPool
from kernelpilot.suite.report import write_report
from kernelpilot.suite.runner import run_jobs
from kernelpilot.suite.store import DB_NAME, Store


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
        from kernelpilot.evaluation import EvalSettings

        folder = Path(job.problem.path).parent
        if folder not in self._cache:
            self._cache[folder] = EvalSettings.from_config(load_config(folder), **self.overrides)
        return self._cache[folder]


def _make_pool(args: argparse.Namespace, settings: Any, run_dir: Path, mode: str,
               jobs: list[Any] = ()) -> Any:  # type: ignore[assignment]
    if args.ray:
        try:
            return RayPool(settings, "auto" if args.ray == "auto" else args.ray, run_dir / "work",
                           build_workers=args.build_workers or default_build_workers())
        except ModuleNotFoundError as exc:  # ray is an optional extra
            if exc.name != "ray":
                raise
            raise RuntimeError(f"{exc} (install it with pip install 'kernelpilot[ray]')") from None

    gpus: list[int | None] = list(args.gpus) if args.gpus else []
    if not gpus and mode != "build" and settings.device == "cuda":
        gpus = list(range(gpu_count()))
        if not gpus:
            raise RuntimeError(f"`kernelpilot suite --mode {mode}` needs a CUDA GPU and none is visible; "
                               "use --mode build to only compile, or --ray ADDRESS for a cluster's GPUs.")
    # every problem and solution, and the run folder (agent mode's per-problem repositories)
    paths = [Path(j.problem.path) for j in jobs] + [Path(j.candidate) for j in jobs if j.candidate is not None]
    paths.append(run_dir)
    slots = gpus or [None]
    split = cores.split(cores.available(), len(slots), getattr(args, "worker_cores", None))
    split.apply()  # before the baseline service starts its threads: they and the builds stay off the workers' cores
    print(f"cores: {split.note}", flush=True)
    services = None
    if mode == "benchmark" and settings.device == "cuda" and (getattr(args, "baselines", None) or "shared") == "shared":
        from kernelpilot.evaluation.baselines.service import BaselineService

        store = BaselineStore(run_dir, [Path(p) for p in getattr(args, "baselines_from", None) or []])
        workers = args.baseline_workers or max(1, min(6, (os.cpu_count() or 3) // 3))
        services = [BaselineService(settings, run_dir / "work" / f"baselines-gpu{g if g is not None else i}", gpu=g,
                                    processes=workers, cache=store) for i, g in enumerate(slots)]
    return LocalPool(settings, slots, run_dir / "work", build_workers=args.build_workers,
                     core_split=split,
                     roots=job_roots(paths), warm=mode != "build", baselines=services)


def _discover(args: argparse.Namespace, plan_levels: list[int] | None) -> list[Any]:
    """Every job of the run's problems (the plan): one per problem in agent mode, else one per solution sample."""
    refs = discovery.discover_problems([Path(p) for p in args.problems], plan_levels)
    if args.model or args.replay:
        return [discovery.Job(r, None, 0) for r in refs]
    return discovery.discover_jobs(refs, Path(args.solutions))


def _added(args: argparse.Namespace, store: Any, plan_levels: list[int] | None) -> list[Any]:
    """--add-new: the solutions folder's jobs that the stored plan lacks planned (Store.extend; on stderr: which);
    the plan after."""
    new = store.extend(_discover(args, plan_levels))
    print(f"kernelpilot: --add-new: {len(new)} new file(s) in {args.solutions} planned"
          + (f" ({', '.join(j.key for j in new[:5])}{', ...' if len(new) > 5 else ''})" if new else ""),
          file=sys.stderr)
    return store.planned_jobs()


@dataclass
class _Run:
    """A run opened for this call: its folder and store, its plan, this call's selection of it, the settings."""

    run_dir: Path
    store: Store
    jobs: list[Any]
    selection: Any  # discovery.select_jobs' answer
    per_problem: ProblemSettings


def _choice(args: argparse.Namespace) -> dict[str, Any]:
    """This call's choice among the plan's pending jobs (--levels, --problems, --samples, --limit)."""
    return {"levels": getattr(args, "levels", None), "select": getattr(args, "select", None),
            "limit": getattr(args, "limit", None), "samples": getattr(args, "samples", None)}


def _select(jobs: list[Any], finished: set[Any], choice: dict[str, Any]) -> Any:
    return discovery.select_jobs(jobs, finished, choice["levels"], choice["select"], choice["limit"], choice["samples"])


def _other_versions(store: Store, now: str) -> list[str]:
    """The code versions of the run's verdicts other than ``now`` (short labels); verdicts stored before versions
    were recorded count as another version only when nothing else is known of them."""
    return [f"{v[:12]}{' (dirty)' if v.endswith('+dirty') else ''}" for v in store.code_versions()
            if v not in (now, "unrecorded")]


def _resume(args: argparse.Namespace, choice: dict[str, Any]) -> _Run | str:
    """The run in --resume RUN, its plan and meta kept (completed if its first call stopped before planning);
    or why it cannot be resumed."""
    run_dir = Path(args.resume)
    if not (run_dir / DB_NAME).is_file():
        return f"{run_dir} is not a suite run (no {DB_NAME}); pass the RUN folder a `kernelpilot suite` made."
    if args.problems:
        return ("--resume continues the run's own plan and takes no PROBLEMS; choose among its pending jobs "
                "with --problems PATTERN, --levels L,L, --samples S,S or --limit N.")
    store = Store(run_dir)
    meta = store.meta()
    if not meta:
        store.close()
        return (f"{run_dir} holds no plan (its first call stopped before planning); start a new run with "
                "`kernelpilot suite PROBLEMS ... --out OTHER`.")
    mixed = _other_versions(store, running_version().key)
    if mixed and not getattr(args, "allow_mixed_versions", False):
        store.close()
        return (f"{run_dir}'s verdicts were judged by another version of kernelpilot's code ({', '.join(mixed)}; this "
                f"is {running_version().label}, git's tree of kernelpilot/): resuming would mix verdicts of two "
                "versions. Start a new run (--out OTHER), or pass --allow-mixed-versions to mix them knowingly (the "
                "report lists the versions).")
    if getattr(args, "add_new", False) and not meta.get("solutions"):
        store.close()
        return ("--add-new looks for new files in the run's --solutions folder; this run has none (an agent "
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
        selection = _select(jobs, store.finished(), choice)
        per_problem = ProblemSettings(_overrides(args, meta))
    except KernelpilotError as exc:
        store.close()
        return str(exc)
    return _Run(run_dir, store, jobs, selection, per_problem)


def _start(args: argparse.Namespace, choice: dict[str, Any]) -> _Run | str:
    """A new run: everything checked before its folder is made (a refused call leaves nothing behind), then
    its plan and meta stored; or why it cannot start."""
    if getattr(args, "add_new", False):
        return "--add-new extends a run's plan: use it with --resume RUN (a new run plans every file anyway)."
    if not args.problems:
        return "no problems given; pass a problem folder, a KernelBench checkout or problem files."
    if not (args.solutions or args.model or args.replay):
        return ("no candidates: pass --solutions DIR (existing solutions) or --model MODEL (an agent session per "
                "problem).")
    run_dir = Path(args.out or Path("kernelpilot-runs") / dt.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
    if (run_dir / DB_NAME).exists():
        return f"{run_dir} already holds a run; continue it with --resume {run_dir} or choose another --out."
    try:
        jobs = _discover(args, None)
        selection = _select(jobs, set(), choice)
        per_problem = ProblemSettings(_overrides(args, {}))
    except KernelpilotError as exc:
        return str(exc)
    store = Store(run_dir)
    store.set_meta(problems=[str(Path(p).resolve()) for p in args.problems],
                   solutions=args.solutions and str(Path(args.solutions).resolve()),
                   mode=args.mode, levels=None, model=args.model, replay=args.replay, rules=per_problem.base.rules,
                   overrides=per_problem.overrides, source=" ".join(args.problems),
                   baselines=args.baselines or "shared",
                   kernelbench=discovery.kernelbench_sources([Path(p) for p in args.problems]),
                   problem_files=_problem_files(jobs, per_problem.base))
    store.plan(jobs)
    return _Run(run_dir, store, jobs, selection, per_problem)


def _execute(args: argparse.Namespace, run: _Run, progress: Progress) -> tuple[bool, str]:
    """Run this call's jobs: (interrupted by Ctrl-C, why the call failed or "")."""
    settings, todo = run.per_problem.base, run.selection.todo
    agent = bool(args.model or args.replay)
    pool: Any = None
    interrupted = False
    try:
        # a pool only for work that needs one: jobs without a candidate are stored at once as missing
        if todo and (agent or any(j.candidate is not None for j in todo)):
            pool = _make_pool(args, settings, run.run_dir, args.mode, todo)
        if agent and todo:
            slots = len(getattr(pool, "stats", []) or getattr(pool, "actors", [])) or 1
            asyncio.run(run_agent_suite([j.problem for j in todo], run.store, run.run_dir, args, pool, progress.result,
                                        concurrency=args.sessions or 2 * slots))
        elif not agent:
            run_jobs(run.store, pool, todo, args.mode, progress.result, settings_for=run.per_problem)
    except KeyboardInterrupt:
        interrupted = True
    except (KernelpilotError, RuntimeError) as exc:
        return False, str(exc)
    finally:
        if pool is not None:
            pool.close(cancel=interrupted)
    return interrupted, ""


def _print_report(args: argparse.Namespace, run_dir: Path, progress: Progress) -> None:
    report, text = write_report(run_dir, claims=getattr(args, "claims", None),
                                checkout=getattr(args, "kernelbench_checkout", None))
    if args.jsonl:
        progress.event("report", path=str(run_dir / "report.md"), overall=report["views"]["sample0"]["overall"],
                       throughput=report["throughput"], complete=report["complete"], not_run_yet=report["not_run_yet"])
    else:
        print(text)
        print(f"run folder: {run_dir}  (report: {run_dir / 'report.md'}; continue with --resume {run_dir})")


def run_suite(args: argparse.Namespace) -> int:
    if getattr(args, "claims", None) is not None:  # a malformed claims file stops the call before anything runs
        try:
            parse_claims(args.claims)
        except KernelpilotError as exc:
            return _fail(str(exc))
    choice = _choice(args)
    run = _resume(args, choice) if args.resume else _start(args, choice)
    if isinstance(run, str):
        return _fail(run)
    files = run.store.meta().get("problem_files") or {}
    if files.get("warning") and not args.jsonl:
        print(f"warning: {files['warning']}")
    run.store.begin(sys.argv, running_version().key)
    selection = run.selection
    todo = selection.todo
    if not args.jsonl and (len(todo) < selection.pending):
        print(f"this call runs {len(todo)} of the run's {selection.pending} jobs without a verdict (--levels, "
              f"--problems, --samples, --limit); the other {selection.left} stay not run yet.")
    progress = Progress(selection.already + len(todo), already=selection.already, jsonl=args.jsonl,
                        planned=len(run.jobs), left=selection.left)
    interrupted, failure = _execute(args, run, progress)
    if failure:
        progress.close()
    run.store.end()
    run.store.close()
    if failure:
        return _fail(failure)
    progress.close(run=str(run.run_dir), interrupted=interrupted)
    _print_report(args, run.run_dir, progress)
    if interrupted:
        print(f"kernelpilot: interrupted; every finished verdict is stored. Continue with `kernelpilot suite --resume "
              f"{run.run_dir}`.", file=sys.stderr)
        return 130
    return 0


def run_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    if not (run_dir / "results.sqlite").is_file():
        return _fail(f"{run_dir} is not a suite run (no results.sqlite); pass the RUN folder a `kernelpilot suite` "
                     "made.")
    try:
        report, text = write_report(run_dir, claims=getattr(args, "claims", None),
                                    checkout=getattr(args, "kernelbench_checkout", None))
    except KernelpilotError as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(text)
    return 0


def _problem_files(jobs: list[Any], settings: Any) -> dict[str, Any]:
    """Which KernelBench commit the problem files match (kernelpilot.kb_files), and a warning when a
    KernelBench preset's published scores were measured on other files."""
    harness = settings.ruleset.harness
    return check(sorted({j.problem.path for j in jobs}), harness.version if harness is not None else None)
