"""``kernelpilot suite`` and ``kernelpilot report``: their arguments (cli_parser.py adds them to the command's
parsers; suite/command.py implements them). Imports only the standard library and small core modules, so
``kernelpilot --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpilot.argtypes import duration, positive_float, positive_int
from kernelpilot.rules import RULE_NAMES

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
    # imported only when --problems is given: --help stays fast
    from kernelpilot.suite.discovery import parse_problem_items

    try:
        return parse_problem_items(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_suite_parser(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """``kernelpilot suite``'s parser, added to the CLI's subparsers."""
    s = sub.add_parser("suite", prog="kernelpilot suite", help="score a suite of problems", formatter_class=fmt,
                       description=SUITE_HELP)
    s.add_argument("problems", metavar="PROBLEMS", nargs="*",
                   help="problem folder, KernelBench checkout, or problem files")
    s.add_argument("--out", metavar="RUN", help="the run folder (default: kernelpilot-runs/<date-time>)")
    s.add_argument("--resume", metavar="RUN",
                   help="continue the run in RUN: evaluate only what has no verdict yet (its plan, "
                   "mode and candidates are the run's own; --levels, --problems, --samples, --limit choose among its "
                   "pending jobs)")
    s.add_argument("--allow-mixed-versions", action="store_true",
                   help="with --resume: go on although the run's verdicts were judged by another version of "
                        "kernelpilot's code (the report then lists the versions)")
    s.add_argument("--add-new", action="store_true",
                   help="with --resume: plan the files added to the run's --solutions folder since it started (a "
                        "folder still being generated, a corpus grown); jobs already planned are kept as they are")
    s.add_argument("--solutions", metavar="DIR", help="existing candidates, no LLM")
    s.add_argument("--model", metavar="MODEL",
                   help="agent mode: a headless agent session per problem with this litellm model")
    s.add_argument("--replay", metavar="FILE", help="agent mode with every session replaying FILE (demos, tests)")
    s.add_argument("--api-base", metavar="URL", help="base URL of a self-hosted model server")
    s.add_argument("--max-turns", type=positive_int, metavar="N", help="per problem: stop its session after N turns")
    s.add_argument("--max-tokens", type=positive_int, metavar="N", help="per problem: stop after N tokens")
    s.add_argument("--budget-usd", type=positive_float, metavar="USD",
                   help="per problem: stop when its session has cost USD")
    s.add_argument("--max-wall", type=duration, metavar="DURATION",
                   help="per problem: stop after this wall time (90s, 30m, 2h)")
    s.add_argument("--suite-budget-usd", type=positive_float, metavar="USD",
                   help="stop starting sessions once all of them have cost USD (the rest count as failures)")
    s.add_argument("--sessions", type=positive_int, metavar="N", help="agent sessions at once (default: 2 per GPU)")
    s.add_argument("--mode", choices=("build", "test", "benchmark"), default="benchmark",
                   help="how far to evaluate (default: benchmark)")
    s.add_argument("--kb-precision", choices=("fp32", "fp16", "bf16"),
                   help="with a KernelBench preset: the precision its harness casts inputs and models to (default "
                        "fp32)")
    s.add_argument("--rules", choices=RULE_NAMES, default="kernelpilot",
                   help="kernelbench: PyTorch ops allowed in ModelNew (each listed as a warning), every other check as "
                        "strict")
    s.add_argument("--levels", type=_levels, metavar="L,L",
                   help="this call runs only pending jobs of these KernelBench levels, e.g. 1,2 (the plan keeps every "
                        "level; to plan one level only, pass its folder: KernelBench/KernelBench/level1)")
    s.add_argument("--problems", dest="select", type=_problem_items, metavar="PATTERN",
                   help="this call runs only pending jobs of these problems: a glob on problem keys ('level1/2*', "
                        "quoted) or a comma-separated list of keys, stems or KernelBench ids "
                        "(level1/23_Softmax,level2/5,1/23; an id alone, 23, matches it in every level)")
    s.add_argument("--samples", type=_samples, metavar="S,S",
                   help="this call runs only pending jobs of these sample indices, e.g. 0 (the sample KernelBench "
                        "scores: a large published set's sample-0 view first, the other samples by a later --resume)")
    s.add_argument("--limit", type=positive_int, metavar="N",
                   help="run at most N of the chosen pending jobs this call, in plan order (the rest stay for "
                        "--resume)")
    s.add_argument("--gpus", type=_gpus, metavar="I,J", help="local GPUs to use (default: every visible one)")
    s.add_argument("--build-workers", type=positive_int, metavar="N", help="parallel builds (default: one per core)")
    s.add_argument("--worker-cores", type=int, metavar="N", help="CPU cores each GPU slot's worker keeps to itself, "
                   "the builds taking the rest (default: a quarter of the cores shared among the slots, at least 2 "
                   "each, on a machine of 8 cores or more; else 0: shared)")
    s.add_argument("--baselines", choices=("shared", "interleaved"),
                   help="benchmark mode: shared (default) compiles and measures eager and torch.compile once per "
                        "problem and GPU off the GPU slot (warming Inductor's caches; sharing the problem's analysis "
                        "and torch.compile's own check); interleaved skips that. Either way every candidate is timed "
                        "beside eager and torch.compile in its slot")
    s.add_argument("--baselines-from", action="append", metavar="RUN",
                   help="benchmark mode: take a problem's shared baselines from this earlier run on this machine where "
                        "they match (same problem file, timing settings and GPU, as --resume would reuse them); "
                        "repeatable. For re-scoring one folder under several rule sets in one session")
    s.add_argument("--baseline-workers", type=positive_int, metavar="N",
                   help="processes compiling and timing the shared baselines, per GPU (default: a third of the cores, "
                        "at most 6)")
    s.add_argument("--ray", metavar="auto|ADDRESS",
                   help="one Ray actor per GPU of a Ray cluster (needs the `ray` extra)")
    s.add_argument("--trials", type=positive_int, metavar="N", help="correctness trials per candidate (default 5)")
    s.add_argument("--timeout", type=positive_float, metavar="SECONDS", help="limit for each build or evaluation step")
    s.add_argument("--jsonl", action="store_true", help="one JSON line per event instead of the progress bar")
    _add_rescore_args(s)
    s.add_argument("--device", choices=("cuda", "cpu"), default="cuda",  # tests of kernelpilot itself
                   help=argparse.SUPPRESS)


def add_report_parser(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """``kernelpilot report``'s parser, added to the CLI's subparsers."""
    r = sub.add_parser("report", prog="kernelpilot report", help="the report of a suite run", formatter_class=fmt,
                       description=(
        "Write RUN/report.md, report.json and speedup.png from RUN/results.sqlite and print the markdown."))
    r.add_argument("run", metavar="RUN", help="the run folder of `kernelpilot suite`")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_rescore_args(r)


def _add_rescore_args(p: Any) -> None:
    p.add_argument("--claims", metavar="FILE", type=Path,
                   help="a CSV of claimed speedups (header: problem or level,problem_id; sample; claimed_x_eager "
                        "and/or claimed_x_compile as ratios; gpu), each put beside the measured one (kept in the run)")
    p.add_argument("--kernelbench-checkout", metavar="PATH", type=Path,
                   help="the KernelBench checkout whose src/kernelbench/kernel_static_checker.py runs on every "
                        "solution (default: the checkout the problems came from; kept in the run)")
