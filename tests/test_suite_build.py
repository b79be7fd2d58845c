"""`kernelpilot suite --mode build` end to end through the CLI, with real nvcc builds (no GPU needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_support import CANDIDATE, PROBLEM


@pytest.mark.slow
def test_suite_build_mode_with_real_builds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.cli import main

    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir()
    for name in ("vector_scale", "broken_scale", "unsolved"):
        (problems / f"{name}.py").write_text(PROBLEM)
    shutil.copytree(CANDIDATE, solutions / "vector_scale")
    shutil.copytree(CANDIDATE, solutions / "broken_scale")
    kernel = solutions / "broken_scale" / "kernel.cu"
    kernel.write_text(kernel.read_text().replace("y[i] = alpha * x[i];", "y[i] = alpha * undefined_name;"))
    run = tmp_path / "run"
    code = main(["suite", str(problems), "--solutions", str(solutions), "--mode", "build", "--out", str(run),
                 "--build-workers", "2", "--jsonl"])
    assert code == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    statuses = {e["problem"]: e["status"] for e in events if e["event"] == "verdict"}
    assert statuses == {"vector_scale": "ok", "broken_scale": "build_error", "unsolved": "missing"}
    report = json.loads((run / "report.json").read_text())
    overall = report["views"]["sample0"]["overall"]
    assert overall["statuses"] == {"build_error": 1, "missing": 1, "ok": 1} and overall["problems"] == 3
    assert report["rules"] == "kernelpilot" and report["mode"] == "build"
    # a second run over the same folder is refused; --resume has nothing left to do
    assert main(["suite", str(problems), "--solutions", str(solutions), "--mode", "build", "--out", str(run)]) == 2
    assert main(["suite", "--resume", str(run), "--jsonl"]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert not [e for e in again if e["event"] == "verdict"]
