"""The evaluation engine without a GPU: settings, checks, audit classification, and the real worker
process in its CPU test mode (device="cpu"), including crash and hang recovery."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings, Evaluator
from kernelpilot.evaluation import protocol
from kernelpilot.verdict import Verdict
from worker_support import ask_worker

DATA = Path(__file__).parent / "data" / "cpu"
PROBLEM = DATA / "scaled_add.py"


# ---- settings ------------------------------------------------------------------------------------
def test_settings_from_config(tmp_path: Path) -> None:
    from kernelpilot.config import load_config

    (tmp_path / "kernelpilot.toml").write_text(
        'trials = 7\ncompile_mode = "max-autotune"\nallowed_libraries = ["cublas"]\n'
        'relaxed_policy = ["import-time"]\n[tolerances]\nbf16 = [0.02, 0.03]\n'
        '[max_normalized_error]\nfp32 = 2e-5\n', encoding="utf-8")
    config = load_config(tmp_path, env={})
    s = EvalSettings.from_config(config)
    assert s.trials == 7 and s.compile_mode == "max-autotune"
    assert s.allowed_libraries == ["cublas"] and s.relaxed_policy == ["import-time"]
    assert s.tolerances["bfloat16"] == (0.02, 0.03)
    assert s.tolerances["float32"] == (1e-4, 1e-4)  # untouched defaults stay
    assert s.max_normalized_error["float32"] == 2e-5
    assert EvalSettings.from_dict(s.to_dict()) == s
    assert EvalSettings.from_config(config, trials=3).trials == 3


def test_settings_refuse_nonsense() -> None:
    from kernelpilot.errors import KernelpilotError

    with pytest.raises(KernelpilotError, match="trials"):
        EvalSettings(trials=0)
    with pytest.raises(KernelpilotError, match="distribution"):
        EvalSettings(distributions=["gaussian"])


def test_importing_the_engine_does_not_import_torch() -> None:
    import subprocess

    code = ("import sys, kernelpilot.evaluation, kernelpilot.evaluation.command, kernelpilot.evaluation.client.process;"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- protocol ------------------------------------------------------------------------------------
def test_protocol_round_trip_and_timeout() -> None:
    r, w = os.pipe()
    try:
        message = {"op": "evaluate", "values": [1.5, float("inf")], "text": "é" * 10}
        protocol.send(w, message)
        got = protocol.recv(r, timeout=5)
        assert got["op"] == "evaluate" and got["text"] == message["text"] and got["values"][1] == float("inf")
        with pytest.raises(protocol.FrameTimeout):
            protocol.recv(r, timeout=0.2)
    finally:
        os.close(w)
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(r, timeout=1)
    os.close(r)


# ---- the Evaluator without a GPU ---------------------------------------------------------------
def _candidate_dir(tmp_path: Path, kernel: str) -> Path:
    d = tmp_path / "cand"
    d.mkdir()
    (d / "kernel.cu").write_text(kernel, encoding="utf-8")
    (d / "binding.cpp").write_text(
        '#include <ATen/core/Tensor.h>\n#include <ATen/ops/empty_like.h>\n#include <cuda_runtime.h>\n'
        '#include <torch/csrc/utils/pybind.h>\n'  # the torch headers it uses: torch/extension.h takes 2-3x longer
        'extern "C" void launch_scale(const float* x, float* y, int n, cudaStream_t s);\n'
        'at::Tensor scale(at::Tensor x) { auto y = at::empty_like(x);\n'
        '  launch_scale(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), nullptr); return y; }\n'
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }\n', encoding="utf-8")
    (d / "model_new.py").write_text(
        "import torch.nn as nn\nfrom kernelpilot.extension import load_extension\n\n_ext = "
        "load_extension(__file__)\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, scale):\n        "
        "super().__init__()\n\n    def forward(self, x, y):\n        return _ext.scale(x)\n", encoding="utf-8")
    return d


@pytest.mark.slow
def test_evaluator_reports_build_error_without_gpu(tmp_path: Path) -> None:
    broken = ('#include <cuda_runtime.h>\n__global__ void k(const float* x, float* y, int n) {\n'
              '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] * undefined_name;\n}\n'
              'extern "C" void launch_scale(const float* x, float* y, int n, cudaStream_t s) {\n'
              '  k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);\n}\n')
    cand = _candidate_dir(tmp_path, broken)
    settings = EvalSettings(device="cpu", build_dir=str(tmp_path / "build"), build_timeout_s=600, confine=False,
                            start_timeout_s=300)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        v = ev.evaluate(PROBLEM, cand, mode="test")
        # the worker was launched before nvcc ran, so it comes up during the build; it must outlive
        # the build (a worker spawned from a helper thread dies with that thread: PR_SET_PDEATHSIG)
        client = ev._client
        assert client is not None and client.starts == 1 and client.alive() and client.pending_ready
        client.wait_ready(300)
        assert client.alive() and client.environment
    assert v.status == "build_error", v.error
    assert v.build is not None and not v.build.ok
    errors = [d for d in v.build.diagnostics if d.severity == "error"]
    assert any("undefined_name" in d.message for d in errors)
    assert any(d.file and d.file.endswith("kernel.cu") and d.line == 4 for d in errors)
    assert v.summary.startswith("build error")
    assert Verdict.from_json(v.to_json()).status == "build_error"
    assert v.build.seconds > 0 and v.phases["build"] == pytest.approx(v.build.seconds, abs=1e-3)


def test_evaluator_rejects_by_static_policy_before_building(tmp_path: Path) -> None:
    cand = _candidate_dir(tmp_path, "#include <cuda_runtime.h>\n")
    model = cand / "model_new.py"
    model.write_text("import threading\n" + model.read_text(encoding="utf-8"), encoding="utf-8")
    with Evaluator(EvalSettings(device="cpu"), workdir=tmp_path / "work") as ev:
        v = ev.evaluate(PROBLEM, cand, mode="test")
    assert v.status == "rejected"
    assert any(f.rule == "import-threading" and f.severity == "reject" for f in v.findings)
    assert v.build is None  # nothing of the candidate ran, not even the compiler


# ---- the worker process in CPU test mode --------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    work = tmp_path_factory.mktemp("worker")
    settings = EvalSettings(device="cpu", confine=False, allowed_libraries=["add", "softmax"],
                            start_timeout_s=300, test_timeout_s=60)
    ev = Evaluator(settings, workdir=work)
    yield ev
    ev.close()


def _ask(ev: Evaluator, candidate: str, problem: Path = PROBLEM, timeout: float = 120) -> Verdict:
    return ask_worker(ev, DATA / candidate, problem, timeout)


def test_worker_ok_and_incorrect(cpu_evaluator: Evaluator) -> None:
    v = _ask(cpu_evaluator, "good.py")
    assert v.status == "ok", v.error
    c = v.correctness
    assert c is not None and c.passed and len(c.trials) == 5
    assert {t.distribution for t in c.trials} == {"normal", "uniform", "scaled"}
    assert {t.order for t in c.trials} == {"candidate_first", "reference_first"}
    assert len({t.seed for t in c.trials}) == 5
    assert c.deterministic and c.inputs_unmodified and c.discriminates
    assert all(t.normalized_error is not None and t.normalized_error < 1e-6 for t in c.trials)
    assert {"problem", "import", "verify", "audit"} <= set(v.phases), v.phases  # where the time went
    assert "timing" not in v.phases and "compile_baseline" not in v.phases  # test mode does not time
    # the first request started the worker and waited all of its start (nothing ran beside it)
    assert 0 < v.phases["worker_wait"] <= v.phases["worker_start"], v.phases
    bad = _ask(cpu_evaluator, "off_by_a_bit.py")
    assert "worker_start" not in bad.phases  # a warm worker
    assert bad.status == "incorrect"
    assert bad.correctness is not None and not bad.correctness.passed
    assert "outside atol" in bad.correctness.trials[0].message


def test_worker_refuses_input_mutation_and_subclasses(cpu_evaluator: Evaluator) -> None:
    v = _ask(cpu_evaluator, "mutates_input.py")
    assert v.status == "incorrect" and v.correctness is not None
    assert v.correctness.inputs_unmodified is False
    lazy = _ask(cpu_evaluator, "lazy_subclass.py")
    assert lazy.status == "rejected"
    assert any(f.rule == "lazy-tensor" for f in lazy.findings)
    assert lazy.correctness is not None and "not a plain torch.Tensor" in lazy.correctness.trials[0].message


def test_worker_catches_a_result_cache(cpu_evaluator: Evaluator) -> None:
    v = _ask(cpu_evaluator, "cached.py")
    assert v.status == "rejected", v.summary
    assert [f.rule for f in v.findings if f.severity == "reject"] == ["result-replay"]
    assert v.correctness is not None and v.correctness.passed  # right values: only the replay gives it away
    # keyed on the inputs' addresses and sampled values: every fresh input misses, the same tensors hit
    keyed = _ask(cpu_evaluator, "cached_by_address.py")
    assert [f.rule for f in keyed.findings if f.severity == "reject"] == ["result-replay"], keyed.summary
    assert "very same input tensors" in next(f.evidence for f in keyed.findings if f.rule == "result-replay")
    # computed every call into one buffer it returns each time: not a cache, yet no drop-in either
    static = _ask(cpu_evaluator, "static_output.py")
    assert static.status == "rejected", static.summary
    assert [f.rule for f in static.findings if f.severity == "reject"] == ["output-reuse"], static.summary
    assert static.correctness is not None and static.correctness.passed
    assert "determinism not judged" in " ".join(static.correctness.notes)
    view = _ask(cpu_evaluator, "transpose_view.py", problem=DATA / "transpose.py")  # shares the input's storage
    assert "result-replay" not in {f.rule for f in view.findings}, view.summary
    assert view.correctness is not None and view.correctness.passed


def test_worker_catches_an_output_written_into_its_input(cpu_evaluator: Evaluator) -> None:
    """ReLU written into a non-negative input leaves every value as it was: the output being the input's
    storage, where the reference returns a new tensor, gives it away."""
    v = _ask(cpu_evaluator, "relu_in_place.py", problem=DATA / "relu.py")
    assert v.status == "incorrect", (v.summary, v.findings, v.error)
    c = v.correctness
    assert c is not None and c.inputs_unmodified is False and c.outputs_own_storage is False
    assert all(t.max_abs_error == 0 for t in c.trials)  # the values alone are right
    assert "input's storage" in c.trials[0].message
    good = _ask(cpu_evaluator, "transpose_view.py", problem=DATA / "transpose.py")  # the reference's is a view too
    assert good.correctness is not None and good.correctness.outputs_own_storage is True, good.summary


def test_worker_audits_torch_ops(cpu_evaluator: Evaluator) -> None:
    strict = EvalSettings(device="cpu", confine=False)
    v = Verdict(status="ok")
    message = {"op": "evaluate", "problem": str(PROBLEM), "candidate_model": str(DATA / "good.py"), "mode": "test",
               "settings": strict.to_dict()}
    response = cpu_evaluator._ask(message, 120, v)
    assert response is not None
    got = Verdict.from_dict(response["verdict"])
    assert got.status == "rejected"
    assert [f.evidence for f in got.findings if f.rule == "torch-compute-op"] == ["aten.add"]


def test_worker_zero_output_fails_low_magnitude_problem(cpu_evaluator: Evaluator) -> None:
    v = _ask(cpu_evaluator, "zeros_softmax.py", problem=DATA / "tiny_softmax.py")
    assert v.status == "incorrect"
    assert v.correctness is not None and v.correctness.discriminates is True
    assert all(t.normalized_error == pytest.approx(1.0) for t in v.correctness.trials)


def test_worker_reports_exceptions_and_parameter_mismatch(cpu_evaluator: Evaluator) -> None:
    v = _ask(cpu_evaluator, "raises.py")
    assert v.status == "runtime_error" and "kernel launch config is wrong" in v.error
    # a parameter of its own that Model lacks is no harness error (KernelBench never compares names): the
    # weights are matched by seed and the candidate is judged on what it computes
    w = _ask(cpu_evaluator, "wrong_params.py")
    assert w.status == "ok", w.error  # y + 0.5 x is this problem (scale 0.5)
    assert w.correctness is not None and w.correctness.weights.startswith("none")


@pytest.mark.slow
def test_worker_crash_and_hang_do_not_break_the_next_evaluation(cpu_evaluator: Evaluator) -> None:
    crash = _ask(cpu_evaluator, "segfault.py")
    assert crash.status == "runtime_error"
    assert "SIGSEGV" in crash.error and "about to crash" in crash.error
    assert _ask(cpu_evaluator, "good.py").status == "ok"
    hang = _ask(cpu_evaluator, "hangs.py", timeout=60)
    # the watchdog, not the 60 s request limit: the first call's allowance is floor + first-call extra
    assert hang.status == "timeout" and "killed" in hang.error, hang.error
    assert "candidate call, trial 1 of 5" in hang.error and "phase verify" in hang.error
    # floor + first-call extra (15 s) plus the call multiple times the reference's own seconds, which a loaded
    # machine stretches (15.4 s seen on 2026-12-07)
    allowance = re.search(r"within its ([0-9.]+) s allowance", hang.error)
    assert allowance is not None and 15.0 <= float(allowance.group(1)) < 20.0, hang.error
    assert 14 < hang.phases["verify"] < 20, hang.phases
    assert any(f.startswith("watchdog: candidate call, trial 1 of 5") for f in hang.flags)
    after = _ask(cpu_evaluator, "good.py")
    assert after.status == "ok", after.error


@pytest.mark.slow
def test_watchdog_catches_a_hang_after_good_calls(tmp_path: Path) -> None:
    """A candidate that answers its first calls and then spins: caught at the call that hung, within
    that call's own allowance, and the next evaluation starts on a fresh worker."""
    import time

    settings = EvalSettings(device="cpu", confine=False, allowed_libraries=["add"], start_timeout_s=300,
                            test_timeout_s=120, call_floor_s=1.0, first_call_s=2.0)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        assert _ask(ev, "good.py").status == "ok"
        t0 = time.monotonic()
        hang = _ask(ev, "hangs_later.py")
        waited = time.monotonic() - t0
        assert hang.status == "timeout", hang.summary
        assert "candidate call, trial 4 of 5" in hang.error and "1.0 s allowance" in hang.error, hang.error
        assert waited < 10, waited  # one call's allowance plus the kill, far from the 120 s request limit
        assert ev._client is not None and ev._client.alive()  # a fresh worker is already starting
        assert _ask(ev, "good.py").status == "ok"


def test_baselines_op_reaches_the_worker_and_says_it_needs_a_gpu(cpu_evaluator: Evaluator) -> None:
    """The worker answers op "baselines" (no CUDA here: a clear refusal, and the worker stays up)."""
    from kernelpilot.errors import KernelpilotError

    with pytest.raises(KernelpilotError, match="the baselines were not measured: .*need a CUDA GPU"):
        cpu_evaluator.baselines(PROBLEM)
    assert cpu_evaluator._client is not None and cpu_evaluator._client.alive()
    assert _ask(cpu_evaluator, "good.py").status == "ok"  # the same worker still evaluates


def test_baselines_round_trip_as_plain_data() -> None:
    from kernelpilot.evaluation.baselines.values import Baselines
    from kernelpilot.verdict import SpeedOfLight, Timing

    b = Baselines(eager=Timing(1.0, 0.9, 1.1, 0.8, 50), compiled=None, gpu="H200",
                  speed_of_light=SpeedOfLight(bound="memory", floor_ms=0.5), eager_pct_of_ceiling=50.0)
    again = Baselines.from_dict(b.to_dict())
    assert again == b and isinstance(again.eager, Timing) and isinstance(again.speed_of_light, SpeedOfLight)


_INLINE = '''"""A single-file candidate whose extension is C++ only, so the CPU test worker can run it."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <Python.h>
static long long ask(PyObject* t, const char* method) {  // x.data_ptr(), x.numel()
  PyObject* r = PyObject_CallMethod(t, method, nullptr);
  long long v = r ? PyLong_AsLongLong(r) : 0;
  Py_XDECREF(r);
  return v;
}
static PyObject* scaled_add(PyObject*, PyObject* args) {
  PyObject *x, *y;
  double s;
  if (!PyArg_ParseTuple(args, "OOd", &x, &y, &s)) return nullptr;
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* out = torch ? PyObject_CallMethod(torch, "empty_like", "O", x) : nullptr;
  Py_XDECREF(torch);
  if (out == nullptr) return nullptr;
  const float* a = (const float*)ask(x, "data_ptr");
  const float* b = (const float*)ask(y, "data_ptr");
  float* o = (float*)ask(out, "data_ptr");
  if (!a || !b || !o) {  // a meta tensor (the build step's probe) has no data: raise, as data_ptr<float>() does
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, "a tensor without data");
    return nullptr;
  }
  for (long long i = 0, n = ask(x, "numel"); i < n; ++i) o[i] = a[i] * (float)s SIGN b[i];
  return out;
}
static PyMethodDef kp_methods[] = {{"scaled_add", scaled_add, METH_VARARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kp_module = {PyModuleDef_HEAD_INIT, "kp_same_name", nullptr, -1, kp_methods};
#define KP_INIT2(name) PyInit_##name
#define KP_INIT(name) KP_INIT2(name)
PyMODINIT_FUNC KP_INIT(TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&kp_module); }
"""  # Python's C API alone (no torch/extension.h: 20-50 s of parsing a compile on 2 cores, not what is tested)
ext = load_inline(name="kp_same_name", cpp_sources=source, no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return ext.scaled_add(x.contiguous(), y.contiguous(), self.scale)
'''


@pytest.mark.slow
def test_single_file_builds_once_and_a_reused_name_loads_its_own_build(tmp_path: Path) -> None:
    """The same bytes elsewhere are a build-cache hit (nothing runs); another candidate with the same
    load_inline name runs its own code (in a fresh worker: a process keeps one extension module per
    name); and so does the first one when it comes back."""
    import shutil
    import uuid

    tag = f"# {uuid.uuid4().hex}\n"  # bytes no earlier run built
    right, wrong = tmp_path / "a" / "cand.py", tmp_path / "b" / "cand.py"
    for path, sign in ((right, "+"), (wrong, "-")):
        path.parent.mkdir()
        path.write_text(tag + _INLINE.replace("SIGN", sign), encoding="utf-8")
    settings = EvalSettings(device="cpu", confine=False, start_timeout_s=300, test_timeout_s=120, build_timeout_s=900)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        first = ev.evaluate(PROBLEM, right, "test")
        assert first.status == "ok", first.error
        assert first.build is not None and first.build.cache == "" and first.build.seconds > 1
        moved = tmp_path / "elsewhere" / "renamed.py"
        moved.parent.mkdir()
        shutil.copyfile(right, moved)
        again = ev.evaluate(PROBLEM, moved, "test")
        assert again.status == "ok", again.error
        assert again.build is not None
        assert (again.build.cache, again.build.seconds, again.build.rebuilt) == ("hit", 0.0, [])
        other = ev.evaluate(PROBLEM, wrong, "test")
        assert other.status == "incorrect", other.summary  # x*s - y: its own build ran, not the loaded module
        assert other.phases["import"] < 20, other.phases  # loaded, not rebuilt under a new name in the worker
        back = ev.evaluate(PROBLEM, right, "test")  # the first library again, in a fresh worker again
        assert back.status == "ok", back.error
        # one worker for the first two (the same library is imported once), a fresh one for each switch
        assert [first.phases.get("worker_start") is not None, "worker_start" in again.phases,
                "worker_start" in other.phases, "worker_start" in back.phases] == [True, False, True, True]
