"""Suite discovery: problem folders, a KernelBench checkout's levels, and the solution layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.suite.discovery import SuiteInputError, discover_jobs, discover_problems, parse_generation_name

PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n" \
          "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"


def _write(path: Path, text: str = PROBLEM) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_generation_names() -> None:
    assert parse_generation_name("level_1_problem_23_sample_0_kernel.py") == (1, 23, 0)
    assert parse_generation_name("level_3_problem_7_sample_12_kernel.py") == (3, 7, 12)
    assert parse_generation_name("level_1_problem_23_sample_0.py") is None
    assert parse_generation_name("23_Softmax.py") is None


def test_kernelbench_checkout_and_generation_layout(tmp_path: Path) -> None:
    kb = tmp_path / "KernelBench"
    _write(kb / "KernelBench" / "level1" / "1_Square_matrix_multiplication_.py")
    _write(kb / "KernelBench" / "level1" / "23_Softmax.py")
    _write(kb / "KernelBench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py")
    problems = discover_problems([kb])
    assert [(p.key, p.level, p.number) for p in problems] == [
        ("level1/1_Square_matrix_multiplication_", 1, 1), ("level1/23_Softmax", 1, 23),
        ("level2/1_Conv2D_ReLU_BiasAdd", 2, 1)]
    assert [p.key for p in discover_problems([kb], levels=[2])] == ["level2/1_Conv2D_ReLU_BiasAdd"]
    runs = tmp_path / "runs" / "my_model"
    for name in ("level_1_problem_1_sample_0_kernel.py", "level_1_problem_1_sample_1_kernel.py",
                 "level_2_problem_1_sample_0_kernel.py", "level_1_problem_99_sample_0_kernel.py"):
        _write(runs / name, "# candidate\n")
    jobs = discover_jobs(problems, tmp_path / "runs")
    got = [(j.problem.key, j.sample, j.candidate.name if j.candidate else None) for j in jobs]
    assert got == [("level1/1_Square_matrix_multiplication_", 0, "level_1_problem_1_sample_0_kernel.py"),
                   ("level1/1_Square_matrix_multiplication_", 1, "level_1_problem_1_sample_1_kernel.py"),
                   ("level1/23_Softmax", 0, None),  # no sample: one job, no candidate (a failure)
                   ("level2/1_Conv2D_ReLU_BiasAdd", 0, "level_2_problem_1_sample_0_kernel.py")]
    assert len({j.key for j in jobs}) == len(jobs)


def test_folder_of_problems_with_named_solutions(tmp_path: Path) -> None:
    _write(tmp_path / "problems" / "1_relu.py")
    _write(tmp_path / "problems" / "softmax" / "problem.py")
    _write(tmp_path / "problems" / "_helper.py", "x = 1\n")  # not a problem
    _write(tmp_path / "sol" / "1_relu.py", "# file candidate\n")
    (tmp_path / "sol" / "softmax").mkdir(parents=True)
    problems = discover_problems([tmp_path / "problems"])
    assert [(p.key, p.level) for p in problems] == [("1_relu", None), ("softmax", None)]
    jobs = discover_jobs(problems, tmp_path / "sol")
    assert [(j.key, j.candidate.name if j.candidate else None) for j in jobs] == \
        [("1_relu#0", "1_relu.py"), ("softmax#0", "softmax")]


def test_bad_inputs_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SuiteInputError, match="does not exist"):
        discover_problems([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteInputError, match="no problem files"):
        discover_problems([tmp_path / "empty"])
    _write(tmp_path / "a" / "relu.py")
    _write(tmp_path / "b" / "relu.py")
    with pytest.raises(SuiteInputError, match="share the name"):
        discover_problems([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(SuiteInputError, match="solutions folder"):
        discover_jobs(discover_problems([tmp_path / "a"]), tmp_path / "nosol")
