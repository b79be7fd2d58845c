"""c0 from recordings of the cases that failed before (tests/data/inductor/c0: Inductor output in torch 2.11's
layout, hand-made at small sizes): module buffers, kernels that call triton_helpers functions which call others,
a scan's own combine function, a Grid2DWithYZOverflow launch, a convolution chain, an attention block, a graph
break, and an RNN with no graph at all. Each candidate must import, construct on the meta device, resolve every
name its kernels use, and, where its pieces run on the CPU, match the problem on the CPU with Triton's
interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.evaluation.static.policy import blocking, check_candidate
from kernelpilot.inductor.c0 import candidate_from_recording, write_candidate
from kernelpilot.inductor.helpers import ConversionError
from kernelpilot.inductor.smoke import check_candidate_dir

pytest.importorskip("triton")
DATA = Path(__file__).parent / "data" / "inductor"
C0 = DATA / "c0"
CASES = ["batch_norm", "helpers", "conv_chain", "attention", "graph_break", "rnn"]
RUNS_ON_CPU = ["batch_norm", "helpers", "conv_chain", "graph_break", "rnn"]  # efficient attention is CUDA's


def recording(name: str) -> tuple[Path, dict[str, Any]]:
    meta = json.loads((C0 / f"{name}.json").read_text())
    graphs = [{**g, "code": (C0 / g["code"]).read_text()} for g in meta["graphs"]]
    data = {**meta, "graphs": graphs, "runtime": {"triton_helpers": (DATA / "triton_helpers_2_11.py").read_text()}}
    return C0 / meta["problem"], data


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    out = {}
    root = tmp_path_factory.mktemp("c0")
    for name in CASES:
        problem, data = recording(name)
        conversion = candidate_from_recording(problem, data)
        write_candidate(root / name, conversion)
        out[name] = (root / name, conversion)
    return out


@pytest.mark.parametrize("name", CASES)
def test_candidate_imports_constructs_and_resolves_every_name(name: str, converted: dict[str, Any]) -> None:
    directory, conversion = converted[name]
    check_candidate_dir(directory, recording(name)[0])
    assert blocking(check_candidate(directory)) == []
    model = (directory / "model_new.py").read_text()
    for leftover in ("async_compile", "torch._inductor", "extern_kernels", "empty_strided_cuda", ".run(stream"):
        assert leftover not in model, leftover


def test_buffers_are_registered_as_buffers_and_bound_by_name(converted: dict[str, Any]) -> None:
    directory, conversion = converted["batch_norm"]
    model = (directory / "model_new.py").read_text()
    assert "self.get_submodule('bn').register_buffer('running_mean', torch.empty((8,), dtype=torch.float32))" in model
    assert "register_buffer('num_batches_tracked', torch.empty((), dtype=torch.int64))" in model
    assert "arg0_1, arg1_1, arg2_1, arg3_1, arg4_1 = x, self.bn.running_mean, self.bn.running_var, " \
           "self.bn.weight, self.bn.bias" in model
    assert conversion.shape == "graph" and conversion.configs == "recorded"


def test_an_older_recording_naming_a_buffer_as_a_parameter_is_fixed() -> None:
    problem, data = recording("batch_norm")
    data["graphs"][0]["sources"] = ["x", "self.get_parameter('bn.running_mean')", "self.bn.running_var",
                                    "self.bn.weight", "self.bn.bias"]
    model = candidate_from_recording(problem, data).files["model_new.py"]
    assert "= x, self.bn.running_mean, self.bn.running_var" in model and "get_parameter" not in model


def test_helpers_that_helpers_call_and_the_scan_combine_function_are_defined(converted: dict[str, Any]) -> None:
    directory, conversion = converted["helpers"]
    helpers = (directory / "triton_helpers.py").read_text()
    for fn in ("def max2(", "def maximum(", "def is_floating(", "def promote_to_tensor("):
        assert fn in helpers, fn  # max2 reduces with maximum, which calls is_floating, which calls promote_to_tensor
    assert "def online_softmax_reduce(" not in helpers  # only what the kernels reach
    model = (directory / "model_new.py").read_text()
    assert model.count("def _triton_helper_fn_add0(") == 1
    # Grid2DWithYZOverflow: y blocks cdiv(64, 32) = 2, over z = cdiv(2, 65535) = 1
    assert "triton_poi_fused_clone_1[(triton.cdiv(16, 16), 2, 1,)](buf2, buf3, 64, 16, YBLOCK=32, XBLOCK=16" in model
    assert sorted(conversion.kernels) == ["triton_per_fused__softmax_0", "triton_per_fused_cumsum_2",
                                          "triton_poi_fused_clone_1"]


def test_a_missing_helper_is_found_before_the_gpu_would(converted: dict[str, Any], tmp_path: Path) -> None:
    directory, _ = converted["helpers"]
    for f in directory.iterdir():
        if f.is_file():
            (tmp_path / f.name).write_text(f.read_text())
    model = (tmp_path / "model_new.py").read_text()
    (tmp_path / "model_new.py").write_text(model.replace("def _triton_helper_fn_add0(", "def _renamed_helper("))
    with pytest.raises(ConversionError, match="uses _triton_helper_fn_add0"):
        check_candidate_dir(tmp_path, recording("helpers")[0])
    (tmp_path / "model_new.py").write_text(model)
    helpers = (tmp_path / "triton_helpers.py").read_text()
    (tmp_path / "triton_helpers.py").write_text(helpers.replace("def is_floating(", "def not_floating("))
    with pytest.raises(ConversionError, match="triton_helpers.py"):
        check_candidate_dir(tmp_path, recording("helpers")[0])


def test_helpers_come_from_the_recording_torch_not_this_one() -> None:
    problem, data = recording("helpers")
    data["runtime"] = {}
    data["torch"] = "2.0.0"
    with pytest.raises(ConversionError, match="carries no triton_helpers source"):
        candidate_from_recording(problem, data)
    text = (DATA / "triton_helpers_2_11.py").read_text()
    assert "def max2(" in candidate_from_recording(problem, data, text).files["triton_helpers.py"]


def test_convolutions_and_attention_are_kept_as_library_calls(converted: dict[str, Any]) -> None:
    conv_dir, conv = converted["conv_chain"]
    model = (conv_dir / "model_new.py").read_text()
    assert conv.libraries == ["cudnn"] and "KERNELPILOT_LIBRARIES = ('cudnn',)" in model
    assert model.count("torch.convolution(") == 2
    att_dir, att = converted["attention"]
    model = (att_dir / "model_new.py").read_text()
    assert att.libraries == ["attention"]
    assert ("buf0 = torch.ops.aten._scaled_dot_product_efficient_attention.default(arg0_1, arg1_1, arg2_1, None, "
            "False)") in model


def test_a_graph_break_runs_both_graphs_and_the_eager_code_between(converted: dict[str, Any]) -> None:
    directory, conversion = converted["graph_break"]
    model = (directory / "model_new.py").read_text()
    assert conversion.shape == "traced"
    assert "g0 = self._graph0(device, self.bmm.weight, self.bmm.bias, x)" in model
    assert "v0 = torch.nn.functional.instance_norm(g0[0]" in model
    assert "g1 = self._graph1(device, v0, y)" in model and "return g1[0]" in model
    assert "cublas" in conversion.libraries and "aten.native_batch_norm" in conversion.libraries
    assert "_warnings.warn" in model  # the break's reason, in the notes


def test_no_graph_is_the_problems_own_model_with_its_libraries(converted: dict[str, Any]) -> None:
    directory, conversion = converted["rnn"]
    model = (directory / "model_new.py").read_text()
    assert conversion.shape == "eager" and conversion.kernels == []
    assert "cudnn" in conversion.libraries and "cublas" in conversion.libraries
    assert "class ModelNew(nn.Module):" in model and "super(ModelNew, self).__init__()" in model
    assert "def get_inputs" not in model and "import triton" not in model


RUNNER = r"""
import importlib.util, json, sys, torch
from pathlib import Path
from kernelpilot.problem import load_problem, make_inputs
results = {}
for name, problem, cand in json.loads(sys.argv[1]):
    module = load_problem(problem).load_module()
    sys.path.insert(0, cand)
    sys.modules.pop("triton_helpers", None)
    # the interpreter has no libdevice without a GPU: its sqrt is tl.sqrt
    text = Path(cand, "model_new.py").read_text().replace("libdevice.sqrt(", "tl.sqrt(")
    Path(cand, "model_new_cpu.py").write_text(text)
    spec = importlib.util.spec_from_file_location("c0_" + name, cand + "/model_new_cpu.py")
    new_mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(new_mod)
    sys.path.remove(cand)
    init = module.get_init_inputs()
    torch.manual_seed(0); ref = module.Model(*init).eval()
    new = new_mod.ModelNew(*init).eval()
    new.load_state_dict(ref.state_dict())
    torch.manual_seed(1); inputs = list(make_inputs(module))
    with torch.no_grad():
        want, got = ref(*inputs), new(*inputs)
    results[name] = [tuple(got.shape) == tuple(want.shape), float((got - want).abs().max())]
print("RESULTS " + json.dumps(results))
"""


def test_the_candidates_match_the_problem_on_the_cpu(converted: dict[str, Any]) -> None:
    # Triton's interpreter runs the kernels on CPU tensors; the library calls run on the CPU too
    jobs = [(name, str(recording(name)[0]), str(converted[name][0])) for name in RUNS_ON_CPU]
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(jobs)], capture_output=True, text=True, env=env,
                          timeout=600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    results = json.loads(line[len("RESULTS "):])
    for name in RUNS_ON_CPU:
        same_shape, diff = results[name]
        assert same_shape and diff < 1e-4, (name, diff)
