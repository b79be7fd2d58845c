"""The ``kernelpilot`` command's arguments: every subcommand's, so ``--help`` is complete (cli.py parses and
dispatches). One function per subcommand adds its parser; SUBCOMMAND_PARSERS lists them in the order of
``kernelpilot --help``. This module imports only the standard library and kernelpilot's small core modules.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

from kernelpilot import __version__
from kernelpilot.argtypes import duration, positive_float, positive_int, row
from kernelpilot.errors import UsageError
from kernelpilot.rules import RULE_NAMES
from kernelpilot.suite.arguments import add_report_parser, add_suite_parser

DESCRIPTION = """\
Pair with an agent on a slow PyTorch operator (a KernelBench-format problem file). Every candidate
kernel gets a verdict: built, correct on fresh random inputs, honest, its speed against eager
PyTorch and torch.compile, and its fraction of the GPU's speed of light.

  kernelpilot [PATH]                     pair in the terminal UI (PATH: problem file or project dir)
  kernelpilot doctor                     check this machine: GPU, toolkit, compiler, linker, headers, a verdict
  kernelpilot run PROBLEM                headless agent session, events on stdout
  kernelpilot eval PROBLEM CANDIDATE     one verdict for one candidate, no LLM
  kernelpilot profile PROBLEM CANDIDATE  where the candidate's GPU time goes (Nsight Compute)
  kernelpilot init [DIR]                 write a starter problem, kernelpilot.toml and candidate
  kernelpilot init --from-inductor P     torch.compile's kernels for P (a problem, a folder, KernelBench) as candidates
  kernelpilot skills [NAME]              list the kernel-writing skills, or print one
  kernelpilot hotspots SCRIPT [ARGS...]  find the slowest operators of a training/inference script
  kernelpilot apply SCRIPT               approved kernels swapped into the script's model, measured end to end
  kernelpilot suite PROBLEMS --solutions DIR   score many problems on every GPU; `report RUN` reprints
  kernelpilot sessions [rm ID|--all]     this repository's sessions: list them, or remove worktree and branch

Run `kernelpilot COMMAND --help` for a command's options (`kernelpilot PATH --help` for the UI's)."""


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="MODEL",
                   help="litellm model string, e.g. anthropic/claude-sonnet-4-5, openai/gpt-5, "
                   "ollama_chat/qwen3-coder, hosted_vllm/NAME (default: `model` in the config or KERNELPILOT_MODEL)")
    p.add_argument("--replay", metavar="FILE",
                   help="replay the model's turns from a JSONL transcript instead of calling an LLM (demos, tests)")
    p.add_argument("--resume", metavar="SESSION", help="continue session SESSION (its worktree, branch and transcript)")


def _problem_and_candidate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problem", metavar="PROBLEM",
                        help="problem file in KernelBench format (or a directory with problem.py)")
    parser.add_argument("candidate", metavar="CANDIDATE",
                        help="candidate directory (model_new.py, binding.cpp, *.cu) or a single-file ModelNew .py")


def _options(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """A subcommand's own option strings (but --help)."""
    return tuple(o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help"))


class _Parser(argparse.ArgumentParser):
    """argparse, but an argument error is raised (``UsageError``) so ``main`` can print it as JSON
    when machine-readable output was asked for; otherwise main prints what argparse would."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, parser=self)


def _doctor(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    doc = sub.add_parser("doctor", prog="kernelpilot doctor", help="check what a verdict needs on this machine",
                         formatter_class=fmt, description=(
        "Check, in order, what a verdict needs here: the GPU and driver, torch's CUDA against the toolkit's\n"
        "nvcc, the host compiler, the linker and nvcc options (probed by building, cached per toolchain),\n"
        "the CUDA headers a build reads, ninja, Triton, ncu and compute-sanitizer, writable caches; then one\n"
        "verdict each for a tiny native and a tiny Triton candidate (build-only without a GPU). Prints a\n"
        "table with a fix for each failure; exit status 1 when an essential check fails."))
    doc.add_argument("--json", action="store_true", help="print the checks as one JSON object")
    doc.add_argument("--refresh", action="store_true", help="probe the toolchain again (ignore the cached answer)")
    doc.add_argument("--no-candidates", action="store_true", help="check the toolchain only (no verdicts)")


def _run(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    run = sub.add_parser("run", prog="kernelpilot run", help="headless agent session", formatter_class=fmt,
                         description=(
        "Run an agent session without the UI: the agent edits candidate kernels in a git worktree of your\n"
        "repository and every candidate is evaluated; events are printed as they happen. Needs a git\n"
        "repository, a CUDA GPU (except with --replay) and a model (except with --replay or --watch)."))
    run.add_argument("problem", metavar="PROBLEM", nargs="?",
                     help="problem file in KernelBench format, or a directory with problem.py "
                     "or a kernelpilot.toml (default: `problem` in the config)")
    _add_model_args(run)
    run.add_argument("--api-base", metavar="URL",
                     help="base URL of a self-hosted model server (ollama, vLLM, OpenAI-compatible)")
    run.add_argument("--max-turns", type=positive_int, metavar="N", help="stop after N agent turns (default 40)")
    run.add_argument("--max-tokens", type=positive_int, metavar="N",
                     help="stop after N prompt+completion tokens (default 2000000)")
    run.add_argument("--budget-usd", type=positive_float, metavar="USD",
                     help="stop when the session has cost USD dollars (default 5)")
    run.add_argument("--max-wall", type=duration, metavar="DURATION",
                     help="stop after this wall time: seconds, or 90s, 30m, 2h (default 1h)")
    run.add_argument("--auto-approve", choices=("faster-than-compile", "never"), default="never",
                     help="land the best candidate on your branch at the end if it is correct and faster than "
                          "torch.compile (default: never; you approve with the UI or by hand)")
    run.add_argument("--jsonl", action="store_true",
                     help="print every event as one JSON line instead of a readable log")
    run.add_argument("--watch", action="store_true",
                     help="manual pairing, no LLM: re-evaluate the candidate each time you save a file")
    run.add_argument("--candidate", metavar="DIR",
                     help="candidate directory to start from (default: `candidate_dir` in the config)")


def _eval(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    ev = sub.add_parser("eval", prog="kernelpilot eval", help="evaluate one candidate (no LLM)", formatter_class=fmt,
                        description=(
        "Build, verify and time one candidate against its problem and print the verdict. Modes:\n"
        "build (compile only; works without a GPU), test (build + correctness + honesty checks),\n"
        "benchmark (test + timing against eager and torch.compile + speed of light). Exit status 0\n"
        "when the verdict is ok, 1 when it is not, 2 on a usage error."))
    _problem_and_candidate(ev)
    ev.add_argument("--json", action="store_true", help="print the verdict as JSON instead of a readable report")
    ev.add_argument("--mode", choices=("build", "test", "benchmark"), default="benchmark",
                    help="how far to go (default: benchmark)")
    ev.add_argument("--trials", type=positive_int, metavar="N",
                    help="correctness trials with fresh random inputs (default 5)")
    ev.add_argument("--compile-mode", choices=("default", "max-autotune"),
                    help="torch.compile mode of the baseline (default: default)")
    ev.add_argument("--cuda-graphs", action="store_const", const=True,
                    help="also time everything captured in CUDA graphs")
    ev.add_argument("--timeout", type=positive_float, metavar="SECONDS",
                    help="limit for each build or evaluation step (default 300)")
    ev.add_argument("--rules", choices=RULE_NAMES,
                    help="scoring rules: kernelpilot (default), kernelbench (KernelBench's "
                    "current scorer beside ours), kernelbench-v0.1")
    ev.add_argument("--kb-precision", choices=("fp32", "fp16", "bf16"), help="with a KernelBench preset: the precision "
                    "its harness casts inputs and models to (default fp32)")


def _profile(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    pr = sub.add_parser("profile", prog="kernelpilot profile", help="profile one candidate's kernels (no LLM)",
                        formatter_class=fmt, description=(
        "Profile the candidate's kernels and the torch.compile baseline's with Nsight Compute (torch.profiler\n"
        "when ncu is missing or not permitted), confined like an evaluation, and print where the time goes:\n"
        "duration, DRAM and SM throughput, occupancy, stalls, sector efficiency and a diagnosis per kernel."))
    _problem_and_candidate(pr)
    pr.add_argument("--verdict", metavar="FILE",
                    help="a benchmark verdict from `kernelpilot eval --json`: adds the roofline")
    pr.add_argument("--full", action="store_true", help="the baseline's kernels in full detail too, no 40-line limit")
    pr.add_argument("--json", action="store_true", help="print every metric as JSON")
    pr.add_argument("--iters", type=positive_int, metavar="N", default=2,
                    help="forward calls profiled per implementation (default 2)")
    pr.add_argument("--no-ncu", action="store_true", help="use torch.profiler even when ncu is available (times only)")
    pr.add_argument("--timeout", type=positive_float, metavar="SECONDS",
                    help="limit for the profiling run (default 300)")


def _init(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    init = sub.add_parser("init", prog="kernelpilot init", help="write a starter problem and config",
                          formatter_class=fmt, description=(
        "Write a starter KernelBench problem (a row softmax in bfloat16), a kernelpilot.toml that names it\n"
        "(every other key present and commented out) and a starter candidate in kernels/NAME/ (softmax.h,\n"
        "softmax.cu, binding.cpp, model_new.py: correct, not fast). DIR must be in a git repository (or pass\n"
        "--git-init).\n"
        "Existing files are kept unless --force.\n\n"
        "With --from-inductor PATH: torch.compile's own run of each problem under PATH as a candidate (c0):\n"
        "Inductor's Triton kernels, its library calls and the eager code dynamo leaves around its graphs.\n"
        "Recording runs torch.compile on this machine's GPU (one process per problem, in parallel under\n"
        "--budget-gb); --recordings DIR converts recordings made before, on any machine. A problem that\n"
        "fails is listed with its reason and never stops the others."))
    init.add_argument("dir", metavar="DIR", nargs="?", default=".",
                      help="project directory (default: the current directory)")
    init.add_argument("--problem", metavar="NAME", default="softmax",
                      help="problem name; writes NAME.py (default: softmax)")
    init.add_argument("--language", choices=("cuda", "cute"), default="cuda",
                      help="the starter candidate's language: CUDA C++ (default) or CuTe DSL ([cute] extra)")
    init.add_argument("--force", action="store_true",
                      help="overwrite NAME.py, kernelpilot.toml and kernels/NAME/ if they exist")
    init.add_argument("--git-init", action="store_true",
                      help="outside a git repository: run `git init` in DIR and commit the starter files (without "
                           "it, init refuses there: sessions work on a branch of your repository)")
    init.add_argument("--from-inductor", metavar="PATH", dest="from_inductor",
                      help="instead: write torch.compile's own kernels (c0) as Triton candidates for PATH: a problem "
                           "file (into DIR/kernels/<problem>-inductor, or --out), or a folder of problems or a "
                           "KernelBench checkout (into --out, default DIR/kernels/c0, one <key>/ per problem as "
                           "`suite --solutions` reads them, with c0-index.json: every problem's outcome and why). "
                           "Recording needs a GPU; --recordings converts existing ones without")
    init.add_argument("--out", metavar="DIR", help="with --from-inductor: the candidate directory (one problem) or "
                                                   "the solutions folder (many) to write")
    init.add_argument("--recordings", metavar="PATH", help="with --from-inductor: convert these recordings instead of "
                                                          "recording on the GPU: a folder of <key>.json (benchmarks/"
                                                          "kb_record.py's layout) or, for one problem, its .json")
    init.add_argument("--helpers", metavar="FILE",
                      help="with --from-inductor: torch/_inductor/runtime/triton_helpers.py of the torch that "
                           "recorded, for recordings that do not carry it")
    init.add_argument("--jobs", type=positive_int, metavar="N", help="with --from-inductor on many problems: "
                                                                     "recording and conversion processes at once "
                                                                     "(default: one per core)")
    init.add_argument("--budget-gb", type=float, metavar="GB", default=110.0, dest="budget_gb",
                      help="with --from-inductor on many problems: GPU memory the parallel recordings may use "
                           "together (default 110)")
    init.add_argument("--timeout", type=positive_float, metavar="S", default=300.0,
                      help="with --from-inductor on many problems: seconds one problem's recording may take "
                           "(default 300)")
    init.add_argument("--levels", metavar="L,L", help="with --from-inductor on a KernelBench checkout: only these "
                                                      "levels (e.g. 1,2)")


def _skills(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    sk = sub.add_parser("skills", prog="kernelpilot skills", help="list the skills, or print one", formatter_class=fmt,
                        description=(
        "Skills are short markdown guides (memory coalescing, warp reductions, TMA, ...) the agent reads\n"
        "on demand. Project skills in .kernelpilot/skills/ are listed too."))
    sk.add_argument("name", metavar="NAME", nargs="?", help="print this skill instead of the list")


def _hotspots(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    hs = sub.add_parser("hotspots", prog="kernelpilot hotspots", help="find the slowest operators of a script",
                        formatter_class=fmt, description=(
        "Run a PyTorch script under the profiler for a few steps, rank the operators by GPU time and,\n"
        "with --extract, write the top ones as KernelBench problem files to pair on.\n"
        "Options go before SCRIPT; everything after SCRIPT is passed to it."))
    hs.add_argument("--steps", type=positive_int, metavar="N", default=10,
                    help="profile N steps (calls of the profiled step) (default 10)")
    hs.add_argument("--top", type=positive_int, metavar="N", default=15,
                    help="show the N most expensive operators (default 15)")
    hs.add_argument("--extract", type=row, metavar="N",
                    help="write hotspot N as a problem file; with --group module|fusion "
                    "N may also be part of a row's text (a class, a path, a chain such as 'silu -> mul')")
    hs.add_argument("--out", metavar="DIR", default="problems",
                    help="directory for extracted problem files (default: problems)")
    hs.add_argument("--group", choices=("op", "module", "fusion"), default="op",
                    help="op: single ATen calls (default); module: the model's modules by inclusive time, forward and "
                         "backward apart; fusion: chains of calls one fused kernel could replace. With module or "
                         "fusion, --extract N writes entry N as a problem directory")
    hs.add_argument("--depth", type=positive_int, metavar="N", default=3, help="with --group module: how deep in the "
                    "model (model.layers.3.mlp is depth 3; default 3)")
    hs.add_argument("--weights", action="store_true", help="with --extract and --group module|fusion: save the "
                    "parameters' real values beside the problem (weights.pt)")
    hs.add_argument("--compile-check", action="store_true", dest="compile_check", help="with --group fusion on the "
                    "CPU: ask torch.compile's C++ backend whether it fuses each chain (always asked on the GPU)")
    hs.add_argument("script", metavar="SCRIPT", help="the Python script to profile")
    hs.add_argument("script_args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments passed to SCRIPT")
    hs.set_defaults(own_options=_options(hs))  # given after SCRIPT they are the script's: the command says so


def _apply(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    ap = sub.add_parser("apply", prog="kernelpilot apply", help="swap approved kernels into a script's model",
                        formatter_class=fmt, description=(
        "Run the script's first steps as it is and with each approved kernel extracted from it (hotspots\n"
        "--group module|fusion --extract) swapped in; print the step time (median and spread of --steps steps\n"
        "after 3 warm-up), the swapped parts' forward time and share, peak device memory, the loss at every\n"
        "step, graph breaks and recompilations under --compile, and the difference of outputs and\n"
        "gradients against the unmodified model (two seeded runs of it are the yardstick). Nothing in your\n"
        "files changes unless --write. Options go before SCRIPT; everything after SCRIPT is passed to it."))
    ap.add_argument("--kernels", metavar="DIR", default="problems",
                    help="where the extracted problems and their approved "
                    "candidates are (<DIR>/<problem>/candidate/dropin.py; default: problems)")
    ap.add_argument("--steps", type=positive_int, metavar="N", default=20, help="timed steps per run (default 20)")
    ap.add_argument("--compile", action="store_true", help="also compile the model's forward with torch.compile, in "
                    "each of --compile-modes: the faster is the baseline, and the swaps are compiled in it")
    ap.add_argument("--compile-modes", metavar="M,M", default=None, help="torch.compile modes tried with --compile "
                    "(default: default,max-autotune-no-cudagraphs)")
    ap.add_argument("--write", action="store_true", help="add the install(model) call to the script: show the diff, "
                    "apply it on confirmation, one git commit")
    ap.add_argument("--yes", action="store_true", help="with --write: do not ask for confirmation")
    ap.add_argument("--summary", metavar="FILE", help="also write every run's measurements as JSON to FILE (step "
                    "time and spread, peak memory, the loss at every step and its band, graph breaks, verdicts)")
    ap.add_argument("script", metavar="SCRIPT", help="the training or inference script")
    ap.add_argument("script_args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments passed to SCRIPT")
    ap.set_defaults(own_options=_options(ap))


def _sessions(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    ss = sub.add_parser("sessions", prog="kernelpilot sessions", help="list or remove this repository's sessions",
                        formatter_class=fmt, description=(
        "List the sessions of the git repository you are in, or remove one (rm ID) or all (rm --all): its "
        "worktree, its\nkernelpilot/<id> branch and its record. Approved candidates stay on your branch; rm names "
        "the unapproved ones."))
    ss.add_argument("action", nargs="?", choices=("list", "rm"), default="list", help="list (default) or rm")
    ss.add_argument("session", metavar="ID", nargs="?", help="with rm: the session to remove")
    ss.add_argument("--all", action="store_true", help="with rm: every session of this repository")
    ss.add_argument("--yes", action="store_true", help="with rm: do not ask for confirmation")


def _pair(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    pair = sub.add_parser("pair", formatter_class=fmt, prog="kernelpilot",
                          usage="kernelpilot [PATH] [--model MODEL] [--replay FILE] [--resume SESSION]",
                          description="Pair with the agent in the terminal UI. Needs a git repository (the agent works "
                                      "in a worktree of it).")
    pair.add_argument("path", metavar="PATH", nargs="?", default=".",
                      help="problem file, or a directory with problem.py or a kernelpilot.toml (default: .)")
    _add_model_args(pair)


# every subcommand's parser, in the order of `kernelpilot --help`
SUBCOMMAND_PARSERS: tuple[tuple[str, Callable[[Any, type[argparse.HelpFormatter]], None]], ...] = (
    ("doctor", _doctor), ("run", _run), ("eval", _eval), ("profile", _profile), ("init", _init), ("skills", _skills),
    ("hotspots", _hotspots), ("apply", _apply), ("sessions", _sessions), ("suite", add_suite_parser),
    ("report", add_report_parser), ("pair", _pair),
)


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="kernelpilot", description=DESCRIPTION, formatter_class=fmt,
        usage="kernelpilot [PATH] [--model MODEL] [--replay FILE] [--resume SESSION]\n"
              "       kernelpilot {doctor,run,eval,profile,init,skills,hotspots,apply,sessions} ...",
    )
    parser.add_argument("--version", action="version", version=f"kernelpilot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{doctor,run,eval,profile,init,skills,hotspots,apply,sessions}")
    for _name, add in SUBCOMMAND_PARSERS:
        add(sub, fmt)
    return parser
