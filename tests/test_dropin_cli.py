"""The command line of hotspots --group and apply, and where an extracted problem came from in
`kernelpilot run`'s log and on the TUI's problem card."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path


def kp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelpilot", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_help_lists_the_new_flags() -> None:
    hotspots = kp("hotspots", "--help")
    for flag in ("--group", "module", "fusion", "--depth", "--weights", "--compile-check"):
        assert flag in hotspots.stdout, flag
    apply = kp("apply", "--help")
    assert apply.returncode == 0 and apply.stdout.startswith("usage: kernelpilot apply")
    for flag in ("SCRIPT", "--kernels", "--steps", "--compile", "--write", "--yes"):
        assert flag in apply.stdout, flag
    assert "kernelpilot apply SCRIPT" in kp("--help").stdout


def test_apply_without_kernels_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    res = kp("apply", "train.py", cwd=tmp_path)
    assert res.returncode == 2
    assert "no approved kernel extracted from train.py under problems/" in res.stderr


def extracted(tmp_path: Path) -> Path:
    directory = tmp_path / "problems" / "4_mlp"
    directory.mkdir(parents=True)
    (directory / "problem.py").write_text("# problem\n")
    (directory / "origin.json").write_text(json.dumps({"kind": "module", "script": "train.py", "path": "layers.3.mlp",
                                                       "paths": ["layers.3.mlp", "layers.4.mlp"], "class": "LlamaMLP"}))
    return directory / "problem.py"


def test_run_log_names_the_module_and_the_apply_command(tmp_path: Path) -> None:
    from kernelpilot.agent.events import ProposalApproved, SessionStarted
    from kernelpilot.agent.headless import LogPrinter

    problem = extracted(tmp_path)
    out = io.StringIO()
    log = LogPrinter(out)
    log(SessionStarted(session_id="s1", problem=str(problem), model="m"))
    log(ProposalApproved(candidate_id="c1", commit="a" * 40))
    text = out.getvalue()
    assert "extracted from model.layers.3.mlp (LlamaMLP) and 1 more like it of train.py" in text
    assert f"apply it to your model: kernelpilot apply train.py --kernels {problem.parent.parent}" in text


def test_problem_card_rows(tmp_path: Path) -> None:
    from kernelpilot.dropin.provenance import apply_command, origin_line
    from kernelpilot.tui.problem_card import CardFacts, card_lines

    problem = extracted(tmp_path)
    rows = dict(card_lines(CardFacts(name="4_mlp", origin=origin_line(problem), apply=apply_command(problem))))
    assert rows["from"].startswith("model.layers.3.mlp (LlamaMLP)")
    assert rows["apply"].startswith("once approved: kernelpilot apply train.py")
    assert origin_line(tmp_path / "other.py") == "" and "from" not in dict(card_lines(CardFacts(name="x")))
