"""Converting real torch.compile output (tests/data/inductor: recorded on an H200 with
benchmarks/inductor_fixtures.py, torch 2.11) into Triton candidates, on the CPU."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernelpilot.evaluation.candidate import declarations, load_candidate, triton_kernels
from kernelpilot.evaluation.static.policy import blocking, check_candidate
from kernelpilot.inductor.c0 import candidate_from_code, write_candidate
from kernelpilot.inductor.convert import graph_inputs, parse_kernels
from kernelpilot.inductor.helpers import ConversionError

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "inductor"
NAMES = ["softmax", "rmsnorm", "layernorm", "cross_entropy", "fused_chain", "row_sum", "gemm_bias_gelu", "conv_relu"]
# recorded with torch 2.11, whose triton_helpers.online_softmax_* take 4 arguments (5 in 2.14): converted with
# a stand-in of 2.11's triton_helpers (the helpers always come from the torch that recorded)
HELPERS_2_11 = (DATA / "triton_helpers_2_11.py").read_text()


def fixture(name: str) -> tuple[Path, str]:
    meta = json.loads((DATA / f"{name}.json").read_text())
    return ROOT / meta["problem"], (DATA / f"{name}.py").read_text()


def test_every_fixture_is_real_inductor_output() -> None:
    for name in NAMES:
        meta = json.loads((DATA / f"{name}.json").read_text())
        assert meta["torch"].startswith("2.") and meta["gpu"] and (ROOT / meta["problem"]).is_file()
        code = (DATA / f"{name}.py").read_text()
        assert "async_compile.triton(" in code and "def call(self, args)" in code
        assert parse_kernels(code) and graph_inputs(code)


def _convert(name: str) -> object:
    problem, code = fixture(name)
    return candidate_from_code(problem, code, helpers_source=HELPERS_2_11, torch_version="2.11.0+cu130")


@pytest.mark.parametrize("name", NAMES)
def test_conversion_is_a_self_contained_triton_candidate(name: str, tmp_path: Path) -> None:
    conversion = _convert(name)
    write_candidate(tmp_path / name, conversion)
    model = (tmp_path / name / "model_new.py").read_text()
    for leftover in ("async_compile", "torch._inductor", "call(args", "extern_kernels", "get_raw_stream",
                     "empty_strided_cuda", "reinterpret_tensor", "assert_size_stride", ".run("):
        assert leftover not in model, leftover
    candidate = load_candidate(tmp_path / name)
    assert candidate.kind == "triton"
    assert blocking(check_candidate(tmp_path / name)) == []
    _, code = fixture(name)
    assert set(triton_kernels(candidate)) >= set(conversion.kernels) == {k.name for k in parse_kernels(code).values()}
    # every kernel is Inductor's, byte for byte
    for k in parse_kernels(code).values():
        assert k.text in model
    assert declarations(candidate)["KERNELPILOT_ORIGIN"] == "inductor"
    ast.parse(model)


def test_library_calls_are_declared_and_kept_as_torch_calls(tmp_path: Path) -> None:
    gemm, conv = _convert("gemm_bias_gelu"), _convert("conv_relu")
    assert gemm.libraries == ["cublas"] and conv.libraries == ["cudnn"]
    g = gemm.files["model_new.py"]
    assert "torch.addmm(arg1_1, arg2_1, torch.as_strided(arg0_1, (4096, 16384), (1, 4096), 0)" in g
    assert "KERNELPILOT_LIBRARIES = ('cublas',)" in g
    assert "torch.convolution(buf0, buf1" in conv.files["model_new.py"]
    for c in (_convert("layernorm"), _convert("rmsnorm"), _convert("row_sum")):
        assert c.libraries == [] and "KERNELPILOT_LIBRARIES" not in c.files["model_new.py"]


def test_graph_inputs_map_to_parameters_and_inputs() -> None:
    # Inductor orders graph inputs by first use: x first for layer_norm, the Linear's weight first for the GEMM
    assert "arg0_1, arg1_1, arg2_1 = x, self.weight, self.bias" in _convert("layernorm").files["model_new.py"]
    g = _convert("gemm_bias_gelu").files["model_new.py"]
    assert "arg0_1, arg1_1, arg2_1 = self.linear.weight, self.linear.bias, x" in g
    assert "self.get_submodule('linear').register_parameter('weight'" in g


def test_recorded_configs_give_a_fixed_launch_with_inductors_grid() -> None:
    problem, code = fixture("layernorm")
    name = next(iter(parse_kernels(code).values())).name
    chosen = {name: {"kwargs": {"XBLOCK": 1, "R0_BLOCK": 2048}, "num_warps": 16, "num_stages": 1}}
    c = candidate_from_code(problem, code, configs=chosen, sources=["x", "self.weight", "self.bias"],
                            helpers_source=HELPERS_2_11)
    model = c.files["model_new.py"]
    assert c.configs == "recorded" and "@triton.autotune" not in model
    assert (f"{name}[(triton.cdiv(131072, 1),)](arg0_1, arg1_1, arg2_1, buf3, 131072, 4096, XBLOCK=1, "
            "R0_BLOCK=2048, num_warps=16, num_stages=1)") in model
    # Grid2D: x from xnumel and XBLOCK, y from ynumel and YBLOCK
    problem, code = fixture("conv_relu")
    k = [k.name for k in parse_kernels(code).values()][2]
    c = candidate_from_code(problem, code, configs={k: {"kwargs": {"YBLOCK": 16, "XBLOCK": 64}, "num_warps": 4,
                                                         "num_stages": 1}}, helpers_source=HELPERS_2_11)
    assert (f"{k}[(triton.cdiv(3136, 64), triton.cdiv(4096, 16),)](buf2, arg1_1, buf3, 4096, 3136, YBLOCK=16, "
            "XBLOCK=64, num_warps=4, num_stages=1)") in c.files["model_new.py"]


def test_without_recorded_configs_inductors_candidates_are_autotuned() -> None:
    c = _convert("rmsnorm")
    assert c.configs == "autotuned"
    model = c.files["model_new.py"]
    assert "@triton.autotune(" in model and "triton.Config({'XBLOCK'" in model
    assert "[lambda meta: (triton.cdiv(131072, meta['XBLOCK']),)]" in model


def test_helpers_are_copied_beside_the_model() -> None:
    c = _convert("layernorm")
    helpers = c.files["triton_helpers.py"]
    assert "def welford_reduce(" in helpers and "def welford(" in helpers and "import torch" not in helpers
    assert "import triton_helpers" in c.files["model_new.py"]


def test_what_cannot_be_converted_says_why() -> None:
    problem, code = fixture("fused_chain")
    with pytest.raises(ConversionError, match="no call"):
        candidate_from_code(problem, code.replace("def call(self, args)", "def other(self, args)"))
    with pytest.raises(ConversionError, match="outside ATen"):
        candidate_from_code(problem, code.replace("del arg0_1\n", "torch.ops.mylib.sort(arg0_1)\n", 1))
    with pytest.raises(ConversionError, match="Grid"):
        candidate_from_code(problem, code.replace("'grid_type': 'Grid1D'", "'grid_type': 'SplitScanGrid'"))


@pytest.mark.slow
def test_converted_candidate_compiles_ahead_for_sm90(tmp_path: Path) -> None:
    from kernelpilot.evaluation.build.step import build_candidate

    problem, _ = fixture("conv_relu")
    write_candidate(tmp_path / "c0", _convert("conv_relu"))
    report = build_candidate(load_candidate(tmp_path / "c0"), problem=problem, arch="sm_90",
                             env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert report.ok, report.diagnostics
    assert len(report.kernels) == 3 and all(k.registers for k in report.kernels)


@pytest.mark.slow
def test_init_from_inductor_without_a_gpu_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from kernelpilot.cli import main

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the recording would run")
    rc = main(["init", "--from-inductor", str(ROOT / "examples" / "softmax" / "problem.py"),
               "--out", str(tmp_path / "c0")])
    assert rc != 0
    assert "cannot start from torch.compile's kernels: no CUDA GPU is visible" in capsys.readouterr().err
    assert not (tmp_path / "c0").exists() or not any((tmp_path / "c0").iterdir())


def test_an_aten_fallback_is_kept_and_declared() -> None:
    problem, code = fixture("fused_chain")
    c = candidate_from_code(problem, code.replace("del arg0_1\n", "buf9 = aten.sort.default(arg0_1)\n", 1),
                            helpers_source=HELPERS_2_11)
    assert "aten.sort" in c.libraries
    assert "buf9 = torch.ops.aten.sort.default(arg0_1)" in c.files["model_new.py"]


def test_an_input_of_another_size_is_refused_with_both_sizes(tmp_path: Path) -> None:
    """Inductor's kernels have the recorded sizes as constants: a smaller input would be read past its end (an
    illegal memory access that names no shape, 2026-12-07 on an H100), so the forward keeps Inductor's own check
    of each input's size and layout as an error that names both."""
    import importlib.util
    import sys

    import torch

    write_candidate(tmp_path / "softmax", _convert("softmax"))
    sys.path.insert(0, str(tmp_path / "softmax"))
    try:
        spec = importlib.util.spec_from_file_location("kp_guarded_softmax", tmp_path / "softmax" / "model_new.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:  # its sibling triton_helpers.py leaves this process too: in sys.modules it is an "installed" module
        sys.path.remove(str(tmp_path / "softmax"))  # that the policy of a later test in this process would refuse
        sys.modules.pop("triton_helpers", None)
    model = module.ModelNew()
    with pytest.raises(ValueError, match=r"a \[32768, 16384\] input .*this one is \[4096, 4096\]"):
        model(torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta"))
    transposed = r"strides \[16384, 1\]\); this one is \[32768, 16384\] \(strides \[1, 32768\]"
    with pytest.raises(ValueError, match=transposed):
        model(torch.empty(16384, 32768, dtype=torch.bfloat16, device="meta").t())
    try:  # the recorded size and layout pass the check (what fails after it is the launch, without a GPU)
        model(torch.empty(32768, 16384, dtype=torch.bfloat16, device="meta"))
    except ValueError as exc:
        assert "specialised" not in str(exc)
    except Exception:  # noqa: BLE001 - Triton cannot launch here
        pass
