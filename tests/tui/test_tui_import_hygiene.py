"""Fast start and clean layering, checked in fresh interpreters (harlequin-style).

- importing the TUI (app module and all its widgets) loads neither torch, litellm nor the agent
  loop: those are imported after the first paint, in a worker;
- importing the core (problem, workspace, evaluation, agent loop) loads no UI library.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["torch", "litellm", "kernelpilot.agent.loop", "kernelpilot.evaluation", "git"]
UI = ["textual", "kernelpilot.tui"]


def loaded_after(code: str, names: list[str]) -> list[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps([n for n in {names!r} if n in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_tui_import_is_light() -> None:
    code = ("import kernelpilot.tui.app, kernelpilot.tui.review, kernelpilot.tui.slash, "
            "kernelpilot.tui.launch, kernelpilot.tui.pairing")
    assert loaded_after(code, HEAVY) == []


def test_core_imports_no_ui_library() -> None:
    code = ("import kernelpilot.problem, kernelpilot.workspace, kernelpilot.evaluation, "
            "kernelpilot.agent.loop, kernelpilot.agent.headless")
    assert loaded_after(code, UI) == []
