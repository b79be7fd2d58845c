"""Problem files: static checks, import, and the meta-device analysis (bytes and FLOPs by hand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.errors import ProblemError
from kernelpilot.problem import ProblemInfo, analyse, load_problem, make_inputs

DATA = Path(__file__).parent / "data" / "problems"


def test_load_problem_does_not_import_torch() -> None:
    code = ("import sys; from kernelpilot.problem import load_problem; load_problem(sys.argv[1]); print('torch' in "
            "sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(DATA / "matmul.py")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_load_problem_reads_source_and_name() -> None:
    problem = load_problem(DATA / "matmul.py")
    assert problem.name == "matmul" and problem.path == (DATA / "matmul.py").resolve()
    assert "class Model" in problem.source


def test_directory_with_problem_py_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "problem.py").write_text((DATA / "softmax_bf16.py").read_text())
    assert load_problem(tmp_path).path == (tmp_path / "problem.py").resolve()


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("bad_no_model.py", "defines no class Model"),
        ("bad_syntax.py", "has a syntax error at line 6: expected ':'"),
        ("bad_no_get_inputs.py", "defines no function get_inputs()"),
        ("bad_get_inputs_not_function.py", "line 10: get_inputs is not a function"),
    ],
)
def test_static_errors(name: str, needle: str) -> None:
    with pytest.raises(ProblemError) as err:
        load_problem(DATA / name)
    assert needle in str(err.value)
    assert str(DATA / name) in str(err.value)


def test_missing_file_and_wrong_suffix(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="does not exist"):
        load_problem(tmp_path / "nope.py")
    text = tmp_path / "problem.txt"
    text.write_text("class Model: pass\n")
    with pytest.raises(ProblemError, match="is not a .py file"):
        load_problem(text)
    with pytest.raises(ProblemError, match="is a directory without a problem.py"):
        load_problem(tmp_path)


def test_builder_with_required_argument_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                    "def get_inputs(n):\n    return [torch.rand(n)]\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(ProblemError, match="line 5: get_inputs\\(\\) must take no required arguments"):
        load_problem(path)


def test_model_without_forward_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("import torch.nn as nn\nclass Model(nn.Module):\n    pass\ndef get_inputs():\n    return []\ndef "
                    "get_init_inputs():\n    return []\n")
    with pytest.raises(ProblemError, match="line 2: class Model has no forward method"):
        load_problem(path)


def test_load_module_twice_gives_independent_modules() -> None:
    problem = load_problem(DATA / "matmul.py")
    a, b = problem.load_module(), problem.load_module()
    assert a is not b and a.__name__ != b.__name__
    assert a.__name__ in sys.modules and a.M == 64


def test_matmul_bytes_and_flops_by_hand() -> None:
    info = analyse(load_problem(DATA / "matmul.py"))
    m, k, n = 64, 32, 48
    assert info.device == "meta"
    assert [s.shape for s in info.inputs] == [(m, k), (k, n)]
    assert [s.shape for s in info.outputs] == [(m, n)]
    assert info.flops == 2 * m * n * k
    assert info.bytes_moved == 4 * (m * k + k * n + m * n)
    assert info.parameter_bytes == 0 and info.dtypes == ["float32"]
    assert info.arithmetic_intensity == pytest.approx(2 * m * n * k / (4 * (m * k + k * n + m * n)))


def test_softmax_bf16_is_memory_only() -> None:
    info = analyse(load_problem(DATA / "softmax_bf16.py"))
    assert info.bytes_moved == 2 * (128 * 1000) * 2  # read once, write once, 2 bytes each
    assert info.flops is None  # the flop counter knows no softmax formula
    assert info.primary_dtype == "bfloat16" and info.dtypes == ["bfloat16"]


def test_linear_counts_parameters_buffers_and_both_outputs() -> None:
    info = analyse(load_problem(DATA / "linear_relu.py"))
    b, i, o = 16, 64, 32
    params = (o * i + o) * 4 + o * 4  # weight + bias + scale buffer
    assert info.parameter_bytes == params and info.parameter_count == o * i + o + o
    assert len(info.outputs) == 2
    assert info.bytes_moved == b * i * 4 + params + 2 * b * o * 4
    assert info.flops == 2 * b * i * o
    assert info.init_inputs == ["64", "32"]


def test_data_dependent_shapes_fall_back_to_cpu() -> None:
    info = analyse(load_problem(DATA / "nonzero_count.py"))
    assert info.device == "cpu"
    assert info.other_inputs == ["0.5"]
    count = info.outputs[0].shape[0]
    assert 0 < count < 100
    assert info.bytes_moved == 100 * 4 + count * 4


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("bad_inputs_not_list.py", "get_inputs() in {path} returned Tensor; it must return a list"),
        ("bad_model_not_module.py", "{path}: Model is not a torch.nn.Module subclass"),
        ("bad_forward_returns_int.py", "{path}: Model.forward returned int as its output"),
        ("bad_forward_raises.py", "{path}: Model.forward raised RuntimeError"),
        ("bad_import_error.py", "importing {path} failed at line 3: ModuleNotFoundError"),
    ],
)
def test_runtime_errors(name: str, needle: str) -> None:
    path = (DATA / name).resolve()
    with pytest.raises(ProblemError) as err:
        analyse(load_problem(path))
    assert needle.format(path=path) in str(err.value)


def test_forward_error_names_the_line() -> None:
    with pytest.raises(ProblemError, match="line 7"):
        analyse(load_problem(DATA / "bad_forward_raises.py"))


def test_info_json_round_trip() -> None:
    info = analyse(load_problem(DATA / "linear_relu.py"))
    again = ProblemInfo.from_dict(json.loads(json.dumps(info.to_dict())))
    assert again == info
    assert again.inputs[0].shape == (16, 64)


def test_extra_shape_sets() -> None:
    import torch

    problem = load_problem(DATA / "matmul.py")
    info = analyse(problem, shape_set={"name": "wide", "inputs": [[8, 16], [16, 1024]]})
    assert info.shape_set == "wide" and info.flops == 2 * 8 * 1024 * 16
    module = problem.load_module()
    expr = make_inputs(module, {"name": "e", "inputs": "[torch.rand(M, 3), torch.rand(3, N)]"})
    assert [tuple(t.shape) for t in expr] == [(64, 3), (3, 48)]
    with pytest.raises(ProblemError, match="gives 1 shapes but get_inputs\\(\\) returns 2 tensors"):
        make_inputs(module, {"name": "short", "inputs": [[1, 2]]})
    # an expression written for another problem (one input where get_inputs() gives two): said, never called
    with pytest.raises(ProblemError, match="'few_rows' gives 1 inputs but get_inputs\\(\\) returns 2"):
        make_inputs(module, {"name": "few_rows", "inputs": "[torch.rand(3, 4096)]"})
    assert isinstance(make_inputs(module)[0], torch.Tensor)
