"""Importing the core (problem, workspace, evaluation, agent loop and tools) loads neither textual,
litellm nor torch: they are imported inside the functions that need them."""

from __future__ import annotations

import json
import subprocess
import sys

CORE = [
    "kernelpilot.problem",
    "kernelpilot.workspace",
    "kernelpilot.approval_rule",
    "kernelpilot.landing",
    "kernelpilot.sessions",
    "kernelpilot.starter",
    "kernelpilot.evaluation",
    "kernelpilot.agent.loop",
    "kernelpilot.agent.tools",
    "kernelpilot.agent.evaltools",
    "kernelpilot.agent.litellm_client",
    "kernelpilot.agent.scripted",
    "kernelpilot.agent.headless",
    "kernelpilot.agent.build_only",
    "kernelpilot.agent.watch",
    "kernelpilot.agent.transcript",
    "kernelpilot.agent.prompts",
]
HEAVY = ["textual", "litellm", "torch"]


def test_core_imports_load_no_heavy_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], f"importing the core loaded {loaded}"
