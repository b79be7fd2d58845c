"""The problem card's facts kept between sessions (kernelpilot/problem_facts.py): found for the same file bytes,
never for an edited file, and read without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot import problem_facts
from kernelpilot.problem import analyse, load_problem

PROBLEM = Path(__file__).parent / "data" / "problems" / "softmax_bf16.py"


def test_the_facts_of_a_problem_are_found_again_only_for_the_same_bytes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_FACTS_CACHE", str(tmp_path / "facts"))
    problem = tmp_path / "softmax.py"
    problem.write_text(PROBLEM.read_text())
    assert problem_facts.lookup(problem) is None
    info = analyse(load_problem(problem), device="meta")
    problem_facts.store(problem, info)
    assert problem_facts.lookup(problem) == info
    problem.write_text(PROBLEM.read_text() + "\n# edited\n")
    assert problem_facts.lookup(problem) is None


def test_reading_the_facts_imports_no_torch(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from kernelpilot import problem_facts; "
            f"problem_facts.lookup(Path({str(PROBLEM)!r})); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERNELPILOT_FACTS_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False"
