"""benchmarks/edit_loop.py on the CPU (issue 27 item 6's smoke test): one small example through the
whole loop, with a real Evaluator, its standby builder, real nvcc builds and the real app's first screen
in fresh processes. The verdicts are runtime errors here (the kernels need a GPU); the figures and
files are what a GPU run writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_edit_loop_measures_an_example_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.errors import ToolchainError
    from kernelpilot.toolkit import find_cuda_home

    try:
        find_cuda_home()
    except ToolchainError:
        pytest.skip("needs the CUDA toolkit (nvcc)")
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))
    import edit_loop

    assert edit_loop.main(["--out", str(tmp_path), "--device", "cpu", "--small", "--examples", "softmax",
                           "--edits", "1", "--profile", "--screen-timeout", "90"]) == 0
    folder = next(tmp_path.glob("edit-loop-*"))
    rows = json.loads((folder / "results.json").read_text())
    assert [r["example"] for r in rows] == ["softmax"]
    r = rows[0]
    for key in ("cold_test_s", "warm_kernel_s", "warm_header_s", "warm_model_s", "warm_benchmark_s", "card_s",
                "warm_benchmark_tested_s", "session_baselines_s",
                "phases", "commit", "gpu"):
        assert key in r, key
    assert "warm_test_s" not in r  # each kind on its own: a median across kinds hid the kernel edits' time
    assert r["cold_test_s"] > 0 and r["warm_kernel_s"] > 0 and r["warm_benchmark_s"] > 0
    assert len(r["commit"]) == 40 and r["gpu"] == "none"
    assert r["baselines_s"] is None  # no GPU: said, not measured
    assert {e["kind"] for e in r["edits"]} == {"kernel", "header", "model"}  # softmax has row_reduce.cuh
    by_kind = {e["kind"]: e for e in r["edits"]}
    assert by_kind["kernel"]["rebuilt"] == ["softmax.cu"] and by_kind["header"]["rebuilt"] == ["softmax.cu"]
    assert "binding.cpp" in r["cold"]["rebuilt"]  # cold: built from nothing
    assert r["benchmark_worker_starts"] == 0  # the benchmark after tests reused the warm worker
    assert "build" in r["phases"]["cold_test"] and r["phases"]["warm_kernel"]["build"] > 0
    assert 0 < r["card_s"] < 60 and "256×256 bfloat16" in r["first_screen"]["second"]["card_text"]
    assert r["nvcc"]["softmax.cu"]["returncode"] == 0 and "cicc" in r["nvcc"]["softmax.cu"]["phases_s"]
    split = r["nvcc"]["softmax.cu"]["variants"]["split-compile"]
    assert split["returncode"] == 0 and split["same_code"] is True  # the same SASS, in less time or not
    # the loop edits a copy: the shipped example is untouched
    assert "#pragma unroll 2" not in (ROOT / "examples" / "softmax" / "candidate" / "softmax.cu").read_text()
    assert "| softmax |" in (folder / "results.md").read_text()
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("softmax ")  # the table comes last


def test_code_digest_sees_the_code_and_not_the_command_line(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from edit_loop_report import code_digest

    from kernelpilot.toolkit import find_cuda_home

    try:
        nvcc = str(find_cuda_home() / "bin" / "nvcc")
    except Exception:
        pytest.skip("needs the CUDA toolkit (nvcc)")
    if not shutil.which(nvcc):
        pytest.skip("needs the CUDA toolkit (nvcc)")
    digests = {}
    for name, scale, extra in (("a", "2.0f", []), ("b", "2.0f", ["-DUNUSED=1", "-t0"]), ("c", "3.0f", [])):
        src = tmp_path / f"{name}.cu"
        src.write_text(f"__global__ void k(float* x) {{ x[threadIdx.x] *= {scale}; }}\n")
        keep = tmp_path / f"keep-{name}"
        keep.mkdir()
        subprocess.run([nvcc, "-O3", "-gencode=arch=compute_90,code=sm_90", *extra, "-c", str(src), "-o",
                        str(tmp_path / f"{name}.o"), "--keep", "--keep-dir", str(keep)], check=True,
                       capture_output=True)
        digests[name] = code_digest(keep)
    assert digests["a"] == digests["b"]  # same code, another command line
    assert digests["a"] != digests["c"]  # another constant


def test_a_triton_edit_is_new_kernel_source_with_the_same_computation(tmp_path: Path) -> None:
    """``--triton``: without a GPU the recording of the shipped problem is converted (the fixture); each edit adds a
    statement to the first @triton.jit kernel's body (inside the function, the kernel's own lines kept), and
    ``restore`` puts the file back byte for byte."""
    import ast
    import shutil

    pytest.importorskip("triton")
    import edit_loop

    example = tmp_path / "softmax"
    shutil.copytree(ROOT / "examples" / "softmax", example)
    candidate, source = edit_loop.triton_candidate("softmax", example, 120)
    assert source == "fixture" and candidate == example / "triton"  # no GPU here: nothing was recorded
    model = candidate / "model_new.py"
    original = model.read_text()
    editor = edit_loop.Editor(model, "triton")
    for n in (1, 2):
        what = editor.edit()
        assert "@triton.jit kernel" in what
        edited = model.read_text()
        kernel = next(f for f in ast.parse(edited).body if isinstance(f, ast.FunctionDef)
                      and any(ast.unparse(d) == "triton.jit" for d in f.decorator_list))
        first = kernel.body[0]
        assert isinstance(first, ast.Assign) and ast.unparse(first) == f"kp_edit_marker = {n}"
        assert edited.replace(f"    kp_edit_marker = {n}  # edit_loop.py\n", "", 1) == original
    editor.restore()
    assert model.read_text() == original


def test_the_triton_loop_checks_the_shape_torch_compile_specialised_its_kernels_to(tmp_path: Path) -> None:
    """The c0 candidate's kernels have the recorded sizes as constants: the loop leaves the example's extra shapes
    out (and names them), the rest of its config kept."""
    import shutil

    import edit_loop

    from kernelpilot.config import load_config

    example = tmp_path / "softmax"
    shutil.copytree(ROOT / "examples" / "softmax", example)
    assert len(load_config(example, env={}).extra_shapes) == 5
    assert edit_loop.drop_extra_shapes(example) == ["n4096", "n65536", "n262144", "ragged", "ragged_cluster"]
    config = load_config(example, env={})
    assert config.extra_shapes == [] and config.problem is not None
    assert edit_loop.drop_extra_shapes(example) == []  # nothing left to drop
