"""``kernelpilot eval PROBLEM CANDIDATE [--json] [--mode] [--trials] ...``: one verdict, no LLM.

The CLI (kernelpilot/cli.py) parses and checks the arguments and passes ``args`` with ``config``
(ProjectConfig, flags applied), ``problem`` and ``candidate`` resolved. Exit status: 0 when the
verdict is ``ok``, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kernelpilot.evaluation import EvalSettings, Evaluator
from kernelpilot.evaluation.render import render_text
from kernelpilot.redact import redact_obj


def settings_from_args(args: argparse.Namespace) -> EvalSettings:
    config = getattr(args, "config", None)
    overrides: dict[str, Any] = {}
    if getattr(args, "trials", None):
        overrides["trials"] = args.trials
    if getattr(args, "compile_mode", None):
        overrides["compile_mode"] = args.compile_mode
    if getattr(args, "cuda_graphs", None):
        overrides["cuda_graphs"] = True
    if getattr(args, "rules", None):
        overrides["rules"] = args.rules
    if getattr(args, "kb_precision", None):
        overrides["kb_precision"] = args.kb_precision
    if getattr(args, "timeout", None):
        t = float(args.timeout)
        overrides.update(build_timeout_s=t, test_timeout_s=t, benchmark_timeout_s=max(t, 600.0))
    if config is None:
        return EvalSettings(**overrides)
    return EvalSettings.from_config(config, **overrides)


def run_eval(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    mode = getattr(args, "mode", None) or "benchmark"
    with Evaluator(settings, keep_warm=False) as evaluator:
        verdict = evaluator.evaluate(Path(args.problem), Path(args.candidate), mode=mode)
    data = redact_obj(verdict.to_dict())
    if getattr(args, "json", False):
        import json

        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        from kernelpilot.verdict import Verdict

        sys.stdout.write(render_text(Verdict.from_dict(data)) + "\n")
    return 0 if verdict.ok else 1
