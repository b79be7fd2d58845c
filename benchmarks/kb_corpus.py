"""KernelBench's own example solutions and adversarial unit-test kernels, as suite jobs (from a checkout).

``kernelbench_jobs(kb, suite_dir)`` copies, from a fetched KernelBench checkout (never committed here):

- each example pair ``model_ex_<name>.py`` / ``model_new_ex_<name>.py`` of its prompts (CUDA and Triton
  backends; the few-shot ones included): the problem and KernelBench's own solution;
- the three adversarial kernels of ``unit_tests/test_kernels`` against ``level1/1_Square_matrix_multiplication_``,
  which KernelBench's tests expect to fail (a reused result, zeroed inputs, a side stream).

Returns (key, problem file, candidate file) triples laid out as ``suite_gpu.materialize_jobs`` lays out
the corpus (``suite_dir/problems/<key>.py``, ``suite_dir/solutions/<key>.py``), and ``EXPECTED``
gives the statuses a correct harness must give them in test mode.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ADVERSARIAL = {  # KernelBench's adversarial unit-test kernel -> what it does and the statuses it must get
    "result_reuse_kernel": {"incorrect", "rejected"},  # torch::empty output: the allocator's stale memory
    "zero_out_kernel": {"incorrect", "rejected"},  # zeroes its inputs (an in-place write)
    "non_default_stream_kernel": {"rejected"},  # its work on a side stream
}
# KernelBench's examples that leave most of the compute to PyTorch: under kernelpilot's default rules a
# torch compute op on large tensors in forward is refused (KernelBench's rules accept them)
EXAMPLES_EXPECTED = {
    "kb_fewshot_mnist2": {"rejected"},  # only max_pool2d is a kernel; conv, relu, linear run as aten ops
}
BACKENDS = ("", "_triton")  # model_new_ex_<x>.py (CUDA) and model_new_ex_<x>_triton.py
EXPECTED: dict[str, set[str]] = {}


def _parses(path: Path) -> bool:
    """A real program, not one of the prompt templates with ``<placeholders>`` (model_ex_2, model_new_ex_2)."""
    import ast

    try:
        return bool(ast.parse(path.read_text()).body)
    except (SyntaxError, ValueError, OSError):
        return False


def _examples(prompts: Path) -> list[tuple[str, Path, Path]]:
    found = []
    for folder in (prompts, prompts / "few_shot"):
        for solution in sorted(folder.glob("model_new_ex_*.py")):
            name = solution.stem[len("model_new_ex_"):]
            base = name[: -len("_triton")] if name.endswith("_triton") else name
            if name != base and not name.endswith("_triton"):
                continue
            if any(name.endswith(s) for s in ("_cute", "_hip", "_tilelang", "_thunderkittens")):
                continue  # other backends: not what this machine runs
            problem = folder / f"model_ex_{base}.py"
            if problem.is_file() and _parses(problem) and _parses(solution):  # model_ex_2: a prompt template
                prefix = "kb_fewshot" if folder.name == "few_shot" else "kb_example"
                found.append((f"{prefix}_{name}", problem, solution))
    return found


def kernelbench_jobs(kb: Path, suite_dir: Path) -> list[tuple[str, Path, Path]]:
    src = kb / "src" / "kernelbench"
    levels = kb / "KernelBench" if (kb / "KernelBench").is_dir() else kb
    problems, solutions = suite_dir / "problems", suite_dir / "solutions"
    problems.mkdir(parents=True, exist_ok=True)
    solutions.mkdir(parents=True, exist_ok=True)
    jobs = []
    for key, problem, solution in _examples(src / "prompts"):
        shutil.copyfile(problem, problems / f"{key}.py")
        shutil.copyfile(solution, solutions / f"{key}.py")
        jobs.append((key, problems / f"{key}.py", solutions / f"{key}.py"))
        EXPECTED[key] = set(EXAMPLES_EXPECTED.get(key, {"ok"}))
    matmul = levels / "level1" / "1_Square_matrix_multiplication_.py"
    for name, expect in ADVERSARIAL.items():
        kernel = src / "unit_tests" / "test_kernels" / f"{name}.py"
        if not kernel.is_file() or not matmul.is_file():
            continue
        key = f"kb_adversarial_{name}"
        shutil.copyfile(matmul, problems / f"{key}.py")
        shutil.copyfile(kernel, solutions / f"{key}.py")
        jobs.append((key, problems / f"{key}.py", solutions / f"{key}.py"))
        EXPECTED[key] = set(expect)
    return jobs
