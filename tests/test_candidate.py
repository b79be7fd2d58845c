"""Loading candidates statically: both forms, and a precise message for every malformed layout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.candidate import CandidateError, load_candidate
from kernelpilot.extension import ExtensionBuildError, options_from_source

DATA = Path(__file__).parent / "data" / "candidates"

MODEL = (
    "import torch\nfrom torch import nn\nfrom kernelpilot.extension import load_extension\n\n"
    "_ext = load_extension(__file__)\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return _ext.scale(x, 2.0)\n"
)


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    target = tmp_path / "cand"
    shutil.copytree(DATA / "vector_scale", target)
    return target


def test_directory_candidate(directory: Path) -> None:
    (directory / "common.cuh").write_text("#pragma once\n")
    candidate = load_candidate(directory)
    assert candidate.kind == "directory"
    assert candidate.model_file == directory.resolve() / "model_new.py"
    assert [p.name for p in candidate.sources] == ["binding.cpp", "kernel.cu"]
    assert [p.name for p in candidate.kernel_files] == ["common.cuh", "kernel.cu"]
    assert [p.name for p in candidate.files] == ["binding.cpp", "common.cuh", "kernel.cu", "model_new.py"]
    assert candidate.root == directory.resolve()
    # naming model_new.py itself means its directory
    assert load_candidate(directory / "model_new.py") == candidate


def test_single_file_candidate() -> None:
    path = DATA / "single_file" / "model_new_inline.py"
    candidate = load_candidate(path)
    assert candidate.kind == "single_file"
    assert candidate.model_file == path.resolve() and candidate.sources == []
    assert candidate.root == path.resolve().parent


def test_missing_model_file(directory: Path) -> None:
    (directory / "model_new.py").unlink()
    with pytest.raises(CandidateError, match=r"has no model_new.py: add one that defines class ModelNew"):
        load_candidate(directory)


def test_no_model_class(directory: Path) -> None:
    (directory / "model_new.py").write_text(MODEL.replace("class ModelNew", "class Model"))
    with pytest.raises(CandidateError, match=r"model_new.py defines no class ModelNew"):
        load_candidate(directory)


def test_model_class_without_forward(directory: Path) -> None:
    (directory / "model_new.py").write_text(MODEL.replace("def forward", "def run"))
    with pytest.raises(CandidateError, match=r"model_new.py line 8: class ModelNew has no forward method"):
        load_candidate(directory)


def test_model_new_as_kernelbench_takes_it(tmp_path: Path) -> None:
    """KernelBench takes whatever the module calls ModelNew: a class that inherits its forward
    (``class ModelNew(Model)``) or a name bound to another class; neither is refused before running."""
    head = "import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
    for name, tail in (("inherits.py", "class ModelNew(Model):\n    pass\n"), ("alias.py", "ModelNew = Model\n"),
                       ("annotated.py", "ModelNew: type = Model\n")):
        (tmp_path / name).write_text(head + tail)
        assert load_candidate(tmp_path / name).kind == "pytorch", name
    (tmp_path / "plain.py").write_text(head + "class ModelNew(nn.Module):\n    pass\n")
    with pytest.raises(CandidateError, match="class ModelNew has no forward method"):
        load_candidate(tmp_path / "plain.py")


def test_python_syntax_error_names_the_line(directory: Path) -> None:
    (directory / "model_new.py").write_text(MODEL.replace("return _ext", "return (_ext"))
    with pytest.raises(CandidateError, match=r"model_new.py line \d+: Python syntax error"):
        load_candidate(directory)


def test_no_kernels_and_no_load_inline(directory: Path) -> None:
    (directory / "kernel.cu").unlink()
    with pytest.raises(CandidateError,
                       match=r"has no .cu files, no @triton.jit kernels, and model_new.py does not call load_inline"):
        load_candidate(directory)


def test_binding_missing(directory: Path) -> None:
    (directory / "binding.cpp").unlink()
    with pytest.raises(CandidateError, match=r"has .cu files but no binding.cpp"):
        load_candidate(directory)


def test_load_extension_never_called(directory: Path) -> None:
    (directory / "model_new.py").write_text(MODEL.replace("_ext = load_extension(__file__)", "_ext = None"))
    with pytest.raises(CandidateError, match=r"never calls load_extension"):
        load_candidate(directory)


def test_single_file_without_load_inline(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("from torch import nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    plain = load_candidate(path)  # a PyTorch rewrite: judged and timed, its verdict says no-kernel
    assert plain.kind == "pytorch" and plain.model_file == path


def test_load_inline_module_named_model_new_py_is_single_file(tmp_path: Path) -> None:
    target = tmp_path / "model_new.py"
    shutil.copy(DATA / "single_file" / "model_new_inline.py", target)
    assert load_candidate(target).kind == "single_file"
    assert load_candidate(tmp_path).kind == "single_file"


def test_not_a_candidate(tmp_path: Path) -> None:
    with pytest.raises(CandidateError, match="does not exist"):
        load_candidate(tmp_path / "nope")
    (tmp_path / "kernel.cu").write_text("")
    with pytest.raises(CandidateError, match="neither a directory nor a .py file"):
        load_candidate(tmp_path / "kernel.cu")


def test_errors_are_one_sentence(directory: Path) -> None:
    (directory / "binding.cpp").unlink()
    with pytest.raises(KernelpilotError) as info:
        load_candidate(directory)
    assert "\n" not in str(info.value) and str(info.value).endswith(".")


def test_build_options_are_read_from_the_source(tmp_path: Path) -> None:
    model = tmp_path / "model_new.py"
    model.write_text(
        "from kernelpilot.extension import load_extension\n"
        "_ext = load_extension(__file__, arch_specific=True, extra_cuda_cflags=['--use_fast_math'], verbose=True)\n"
    )
    assert options_from_source(model) == {"arch_specific": True, "extra_cuda_cflags": ["--use_fast_math"]}
    model.write_text("import kernelpilot.extension as kx\nFLAGS = ['-O2']\n_ext = kx.load_extension(__file__, "
                     "extra_cflags=FLAGS)\n")
    with pytest.raises(ExtensionBuildError,
                       match=r"model_new.py line 3: load_extension\(extra_cflags=...\) must be a literal"):
        options_from_source(model)
    model.write_text("from kernelpilot.extension import load_extension\n_ext = load_extension(__file__, "
                     "extra_cuda_cflags='-O2')\n")
    with pytest.raises(ExtensionBuildError, match=r"extra_cuda_cflags=...\) must be a list of strings, not '-O2'"):
        options_from_source(model)
