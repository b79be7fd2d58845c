"""The command line of hotspots --group and apply, and where an extracted problem came from in
`kernelpilot run`'s log and on the TUI's problem card."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path


def kp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelpilot", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_help_lists_the_new_flags() -> None:
    hotspots = kp("hotspots", "--help")
    for flag in ("--group", "module", "fusion", "--depth", "--weights", "--compile-check"):
        assert flag in hotspots.stdout, flag
    apply = kp("apply", "--help")
    assert apply.returncode == 0 and apply.stdout.startswith("usage: kernelpilot apply")
    for flag in ("SCRIPT", "--kernels", "--steps", "--compile", "--write", "--yes", "--summary"):
        assert flag in apply.stdout, flag
    assert "kernelpilot apply SCRIPT" in kp("--help").stdout


def test_apply_without_kernels_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    res = kp("apply", "train.py", cwd=tmp_path)
    assert res.returncode == 2
    assert "no approved kernel extracted from train.py under problems/" in res.stderr


def test_apply_options_after_script_are_the_scripts_and_the_error_says_to_move_them(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "kernels").mkdir()
    res = kp("apply", "train.py", "--kernels", "kernels", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    note, error = res.stderr.strip().splitlines()
    assert note == ("note: --kernels came after train.py, so it goes to train.py as its own argument, not to "
                    "kernelpilot; kernelpilot's options go before SCRIPT.")
    assert error.startswith("kernelpilot: no approved kernel extracted from train.py under problems/")
    assert "the --kernels after train.py went to it as its own argument" in error
    assert error.endswith("pass --kernels DIR before SCRIPT: kernelpilot apply --kernels DIR train.py.")


FAILING = """import torch
from torch import nn


def helper(x):
    return x @ torch.ones(3, 5)


class M(nn.Module):
    def forward(self, x):
        return helper(x)


m = M()
for step in range(3):
    m(torch.ones(4, 4))
"""


def test_a_scripts_own_exception_is_one_line_with_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FAILING)
    for args in (["hotspots", "train.py", "--steps", "2"], ["hotspots", "--group", "module", "train.py"]):
        res = kp(*args, cwd=tmp_path)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        lines = res.stderr.strip().splitlines()
        assert lines[-1] == ("kernelpilot: train.py raised RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                             "(4x4 and 3x5) at train.py:6 (in helper); run it on its own (python train.py) for the "
                             "whole traceback, fix it, and try again."), lines
        assert len(lines) == (2 if "--steps" in args else 1)  # and the note: --steps after SCRIPT went to the script
        if "--steps" in args:
            assert lines[0].startswith("note: --steps came after train.py, so it goes to train.py")


def test_a_scripts_own_exception_under_apply_names_its_file_and_line(tmp_path: Path) -> None:
    from types import SimpleNamespace

    import pytest

    from kernelpilot.dropin.apply_command import apply_command
    from kernelpilot.errors import KernelpilotError

    (tmp_path / "train.py").write_text(FAILING)
    candidate = tmp_path / "problems" / "1_m" / "candidate"
    candidate.mkdir(parents=True)
    (candidate / "dropin.py").write_text("# an approved drop-in\n")
    (candidate.parent / "origin.json").write_text(json.dumps({"kind": "module", "script": "train.py", "path": ""}))
    args = SimpleNamespace(script=str(tmp_path / "train.py"), script_args=[], kernels=str(tmp_path / "problems"),
                           steps=2, compile=False, write=False, yes=True)
    with pytest.raises(KernelpilotError) as failed:
        apply_command(args)
    said = str(failed.value)
    assert "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x4 and 3x5) at " in said
    assert "train.py:6 (in helper)" in said and "\n" not in said


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
