"""The problem card's facts kept between sessions (kernelpilot/problem_facts.py): found for the same file bytes,
never for an edited file, and read without importing torch."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kernelpilot import problem_facts
from kernelpilot.problem import ProblemInfo, TensorSpec, analyse, load_problem

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


def marked(info: ProblemInfo, shape: tuple[int, ...]) -> ProblemInfo:
    """``info`` with an input shape no analysis of the file gives: an answer that can only come from the cache."""
    spec = info.inputs[0]
    return replace(info, inputs=[TensorSpec(shape, spec.dtype, spec.nbytes)])


def test_the_facts_live_beside_the_machines_cached_baselines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELPILOT_FACTS_CACHE", raising=False)
    monkeypatch.setenv("KERNELPILOT_BASELINES_CACHE", str(tmp_path / "machine" / "baselines.sqlite"))
    assert problem_facts.folder() == tmp_path / "machine" / "problem-facts"


def test_an_edited_problem_file_is_analysed_again_apart_and_the_new_facts_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """analyse_apart answers from the cache for the same bytes; once the file changes, the stale entry is not
    used: a process of its own analyses the new file (this one imports no torch for it) and stores the answer."""
    monkeypatch.setenv("KERNELPILOT_FACTS_CACHE", str(tmp_path / "facts"))
    problem = tmp_path / "softmax.py"
    problem.write_text(PROBLEM.read_text())
    real = analyse(load_problem(problem), device="meta")
    problem_facts.store(problem, marked(real, (7, 7)))
    info, error = problem_facts.analyse_apart(problem)
    assert error == "" and info is not None and info.inputs[0].shape == (7, 7)  # the cached answer
    problem.write_text(PROBLEM.read_text().replace("batch, dim = 128, 1000", "batch, dim = 64, 1000"))
    info, error = problem_facts.analyse_apart(problem)
    assert error == "" and info is not None and info.inputs[0].shape == (64, 1000)
    assert problem_facts.lookup(problem) == info


def test_a_problem_that_cannot_be_analysed_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_FACTS_CACHE", str(tmp_path / "facts"))
    problem = tmp_path / "broken.py"
    problem.write_text(PROBLEM.read_text().replace("return [torch.rand(", "return [torch.no_such_thing("))
    info, error = problem_facts.analyse_apart(problem)
    assert info is None and "no_such_thing" in error
    assert problem_facts.lookup(problem) is None


def test_the_analysis_process_reads_the_bytecode_cache_this_process_reads(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the launcher reads kernelpilot's bytecode cache (no bytecode of torch's own, none may be written), the
    analysis process it starts for the card reads it too, and writes none; elsewhere its environment is this one's."""
    monkeypatch.setenv("KERNELPILOT_FACTS_CACHE", str(tmp_path / "facts"))
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert problem_facts.child_env() is None
    prefix = tmp_path / "pycache"
    prefix.mkdir()
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    env = problem_facts.child_env()
    assert env is not None and env["PYTHONPYCACHEPREFIX"] == str(prefix) and env["PYTHONDONTWRITEBYTECODE"] == "1"
    problem = tmp_path / "softmax.py"
    problem.write_text(PROBLEM.read_text())
    info, error = problem_facts.analyse_apart(problem)
    assert error == "" and info is not None and info.inputs[0].shape == (128, 1000)
    assert not any(prefix.rglob("*.pyc"))  # read-only: what was not there was compiled in memory
