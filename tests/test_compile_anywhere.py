"""load_inline wherever a candidate calls it: in ModelNew.__init__, its first forward or an autograd Function the
build step compiles it (ModelNew built and called on the meta device); what it cannot reach (a compile on the
second call) the worker compiles under the build limit with the call's deadline paused, counted as build time."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0

def get_inputs():
    return [torch.randn(16, 32)]

def get_init_inputs():
    return []
"""

# An extension module on Python's C API alone, whose function @F(x) is x.@M(@V): built with load_inline's
# no_implicit_headers, it skips torch/extension.h, whose parsing takes 20-50 s a compile on 2 cores. Where a compile
# runs, its confinement and the compiler wrapper are the same for any C++ source.
PY_MODULE = """
#include <Python.h>
static PyObject* @F(PyObject*, PyObject* x) { return PyObject_CallMethod(x, "@M", "d", @V); }
static PyMethodDef kp_methods[] = {{"@F", @F, METH_O, nullptr}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kp_module = {PyModuleDef_HEAD_INIT, "@F", nullptr, -1, kp_methods};
#define KP_INIT2(name) PyInit_##name
#define KP_INIT(name) KP_INIT2(name)
PyMODINIT_FUNC KP_INIT(TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&kp_module); }
"""

CANDIDATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The build step's three on Python's C API; the worker's compile keeps torch's headers: it must outlast the call's
# 2 s allowance.
LIGHT = """''' + PY_MODULE + '''"""
TWICE = LIGHT.replace("@F", "twice").replace("@M", "mul").replace("@V", "2.0")
PLUS_ONE = LIGHT.replace("@F", "plus_one").replace("@M", "add").replace("@V", "1.0")
HALF = LIGHT.replace("@F", "half").replace("@M", "mul").replace("@V", "0.5")
TWICE_TORCH = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) { return x * 2.0; }
"""


class Twice(torch.autograd.Function):  # compiles in its forward, as some published solutions do
    @staticmethod
    def forward(ctx, x):
        ext = load_inline(name="kp_test_twice_function", cpp_sources=TWICE, no_implicit_headers=True)
        return ext.twice(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.half = load_inline(name="kp_test_half_init", cpp_sources=HALF, no_implicit_headers=True)
        self.plus = None
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.plus is None:  # compiled on the first call: the build step's meta-device call reaches it
            self.plus = load_inline(name="kp_test_plus_one_forward", cpp_sources=PLUS_ONE, no_implicit_headers=True)
        y = self.plus.plus_one(Twice.apply(self.half.half(x)) * 2.0)  # (2 * (x / 2)) * 2 + 1
        if self.calls == 2:  # beyond the build step's reach: compiles in the worker, on the second call
            late = load_inline(name="kp_test_twice_second_call", cpp_sources=TWICE_TORCH, functions=["twice"])
            return late.twice(y - 1.0) * 0.5 + 1.0
        return y
'''


@pytest.mark.slow
def test_compiles_in_init_and_forward_are_build_time_not_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    """Confined and with the precompiled-header wrapper as CXX, as the product runs: the worker must be
    allowed to run the wrapper (on the H200 a forward's compile failed with 'Permission denied')."""
    from kernelpilot.evaluation import EvalSettings, Evaluator

    monkeypatch.setenv("KERNELPILOT_PCH", "1")
    # outside the problem's folder (which the worker may read), as kernelpilot's cache is
    monkeypatch.setenv("KERNELPILOT_PCH_DIR", str(tmp_path_factory.mktemp("pch")))
    (tmp_path / "problem.py").write_text(PROBLEM)
    token = uuid.uuid4().hex[:8]  # new names: no extension of an earlier run is in torch's cache
    (tmp_path / "cand.py").write_text(CANDIDATE.replace("kp_test_", f"kp_test_{token}_"))
    # allowances far below a C++ compile (tens of seconds here): without the pause this is a timeout
    settings = EvalSettings(device="cpu", confine=True, rules="kernelbench", trials=2, call_floor_s=2.0,
                            first_call_s=2.0, start_timeout_s=300, test_timeout_s=600, build_timeout_s=600,
                            relaxed_policy=["*"])
    with Evaluator(settings, workdir=tmp_path / "work", keep_warm=False) as ev:
        v = ev.evaluate(tmp_path / "problem.py", tmp_path / "cand.py", "test")
    assert v.status == "ok", (v.status, v.error, v.summary)
    assert v.phases.get("build_in_worker", 0) > 1.0, v.phases  # the second call's compile, in the worker
    flag = next(f for f in v.flags if f.startswith("compiled inside the worker"))
    assert "twice_second_call" in flag, flag
    # __init__'s, the first forward's and the autograd Function's: the build step (ModelNew on the meta device)
    assert not any(n in flag for n in ("half_init", "plus_one_forward", "twice_function")), flag
    probe = next(d.message for d in v.build.diagnostics if "meta device" in d.message)
    assert all(n in probe for n in ("half_init", "plus_one_forward", "twice_function")), probe
    assert v.phases["import"] < 5.0, v.phases  # the build step's library loads, it is not rebuilt
    assert v.build is not None and v.build.seconds >= v.phases["build_in_worker"]
    assert v.kernelbench is not None and v.kernelbench.status == "correct"


def test_an_arch_list_without_this_gpu_is_said() -> None:
    from kernelpilot.evaluation.build.builder_notes import ARCH_LIST_TOOL, arch_list_diagnostic

    ours = arch_list_diagnostic("8.0;9.0", "sm_90")
    assert ours.tool == ARCH_LIST_TOOL and "does not include" not in ours.message
    other = arch_list_diagnostic("7.5 8.0+PTX", "sm_90")
    assert "does not include this GPU's architecture (9.0)" in other.message
    assert "does not include" not in arch_list_diagnostic("9.0a", "sm_90a").message


def test_a_compile_inside_a_call_pauses_its_deadline() -> None:
    import time

    from kernelpilot.evaluation.worker import watchdog

    sent: list[dict] = []
    dog = watchdog.Watchdog(sent.append, None)
    dog.allowance = watchdog.Allowance(build_s=123.0)
    dog.arm("call", "forward", 5.0)
    time.sleep(0.2)
    with dog.compiling("load_inline('x')"):
        assert sent[-1]["allow_s"] == 123.0 and sent[-1]["call"].startswith("compile: ")
        time.sleep(0.3)  # compile time is not taken from the call's allowance
    assert sent[-1]["call"] == "forward" and 4.5 < sent[-1]["allow_s"] <= 4.8


def test_a_call_under_an_instrument_gets_its_slowdown_times_the_slowest_call() -> None:
    """A slow candidate (a loop of many small ATen calls: 1 s plain, 7-11 s under a Python dispatch mode) is not
    a hang when the audit records its operators; a hang is still one."""
    import time

    from kernelpilot.evaluation.worker import watchdog

    sent: list[dict] = []
    dog = watchdog.Watchdog(sent.append, None)
    dog.begin(watchdog.Allowance(floor_s=1.0, first_call_s=0.0))
    with dog.calls("verify", "candidate call"):
        time.sleep(0.3)
    with dog.calls("audit", "forward under the operator recorder", slowdown=30.0):
        assert sent[-1]["allow_s"] >= 1.0 + 30 * 0.3
        time.sleep(0.5)
    with dog.calls("verify", "candidate call"):  # the instrumented call is not taken as the candidate's own time
        assert 1.0 + 2 * 0.3 <= sent[-1]["allow_s"] < 1.0 + 2 * 0.5, sent[-1]
    dog.begin(watchdog.Allowance(floor_s=1.0, first_call_s=0.0))  # a new request forgets the old one's calls
    with dog.calls("audit", "forward under the operator recorder", slowdown=30.0):
        assert sent[-1]["allow_s"] == 1.0


def test_calls_get_twice_the_slowest_call_seen_beside_the_eager_allowance() -> None:
    """A correct candidate far slower than eager is timed, not killed: the timed rounds' allowance (100x the
    eager time per call) is raised to twice its slowest verified call; a new request starts from nothing."""
    import time

    from kernelpilot.evaluation.worker import watchdog

    sent: list[dict] = []
    dog = watchdog.Watchdog(sent.append, None)
    dog.begin(watchdog.Allowance(floor_s=1.0, first_call_s=0.0, multiple=100.0))
    dog.reference_s = 0.001  # eager: 1 ms a call
    with dog.calls("verify", "candidate call"):
        assert sent[-1]["allow_s"] == pytest.approx(1.0 + 0.1)
        time.sleep(0.4)  # 400x eager
    with dog.calls("timing", "timed calls", n=30):
        assert sent[-1]["allow_s"] >= 1.0 + 30 * 2 * 0.4, sent[-1]  # not 1 + 30 x 0.1 = 4 s
    dog.begin(watchdog.Allowance(floor_s=1.0, first_call_s=0.0))
    with dog.calls("timing", "timed calls", n=30):
        assert sent[-1]["allow_s"] == 1.0


OFF_META = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(32)).cuda()  # explicit CUDA, as many published solutions write
        self.register_buffer("shift", torch.zeros(32, device="cuda"))

    def forward(self, x):
        x = x.cuda().to("cuda", torch.float32).to(device="cuda:0")
        tmp = torch.empty(x.shape, device=torch.device("cuda"))
        return torch.add(x * self.scale, self.shift, out=tmp)
'''


def test_the_build_steps_probe_never_starts_cuda(tmp_path: Path) -> None:
    """The meta-device probe runs beside a candidate being timed: tensors a candidate asks for on CUDA
    explicitly are made on the meta device (the probe goes on to later compiles), and nothing starts CUDA.
    On a torch without CUDA, any CUDA tensor would stop the probe with an error."""
    import json
    import subprocess
    import sys

    from kernelpilot.evaluation.build.step import SINGLE_FILE_BUILDER

    (tmp_path / "problem.py").write_text(PROBLEM)
    (tmp_path / "cand.py").write_text(OFF_META)
    check = SINGLE_FILE_BUILDER.replace('print("KERNELPILOT_BUILD_RESULT',
                                        'import torch; result["cuda"] = '
                                        'torch.cuda.is_initialized()\nprint("KERNELPILOT_BUILD_RESULT')
    out = subprocess.run([sys.executable, "-c", check, str(tmp_path / "cand.py"), str(tmp_path / "problem.py")],
                         capture_output=True, text=True, timeout=300)
    line = next(x for x in out.stdout.splitlines() if x.startswith("KERNELPILOT_BUILD_RESULT "))
    result = json.loads(line.split(" ", 1)[1])
    assert result["model_built"] is True, result
    assert result["forward_probe"] == "ran", result
    assert result["cuda"] is False, result

    # a CUDA call the probe cannot put on the meta device stops the probe, never starts CUDA
    (tmp_path / "cand.py").write_text(OFF_META.replace("tmp = torch.empty",
                                                       "torch.cuda.synchronize()\n        tmp = torch.empty"))
    out = subprocess.run([sys.executable, "-c", check, str(tmp_path / "cand.py"), str(tmp_path / "problem.py")],
                         capture_output=True, text=True, timeout=300)
    result = json.loads(next(x for x in out.stdout.splitlines()
                             if x.startswith("KERNELPILOT_BUILD_RESULT ")).split(" ", 1)[1])
    assert result["forward_probe"].startswith("stopped: _Probe: the forward would start CUDA"), result
    assert result["cuda"] is False, result


FILES_CANDIDATE = '''
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SRC = """''' + PY_MODULE.replace("@M", "add").replace("@V", "2.0") + '''"""  # Python's C API alone


def _written(name):  # sources written to a fresh temporary folder at run time, as some published solutions do
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, name + ".cpp")
    with open(path, "w") as f:
        f.write(SRC.replace("@F", name))
    return path


top = load(name="kp_test_files_top", sources=[_written("plus2")], build_directory=tempfile.mkdtemp())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = load(name="kp_test_files_init", sources=[_written("plus2b")])

    def forward(self, x):
        return self.inner.plus2b(top.plus2(x * 2.0) - 2.0) - 1.0  # 2x + 1
'''


@pytest.mark.slow
def test_cpp_extension_load_of_files_written_at_run_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """``cpp_extension.load`` of sources a candidate writes to a new temporary folder at import (built in another
    new one) and in ``__init__``: compiled in the build step; the confined worker writes its own copies and
    loads the built libraries without compiling again (the same bytes in other folders). Before, the file was a
    "PyTorch rewrite" (rejected [no-kernel]: only load_inline was seen), then compiled twice in the worker."""
    from kernelpilot.evaluation import EvalSettings, Evaluator

    monkeypatch.setenv("KERNELPILOT_PCH", "1")
    monkeypatch.setenv("KERNELPILOT_PCH_DIR", str(tmp_path_factory.mktemp("pch")))
    (tmp_path / "problem.py").write_text(PROBLEM)
    token = uuid.uuid4().hex[:8]
    (tmp_path / "cand.py").write_text(FILES_CANDIDATE.replace("kp_test_", f"kp_test_{token}_"))
    settings = EvalSettings(device="cpu", confine=True, rules="kernelbench", trials=2, call_floor_s=2.0,
                            first_call_s=2.0, start_timeout_s=300, test_timeout_s=600, build_timeout_s=600)
    with Evaluator(settings, workdir=tmp_path / "work", keep_warm=False) as ev:
        v = ev.evaluate(tmp_path / "problem.py", tmp_path / "cand.py", "test")
    assert v.status == "ok", (v.status, v.error, v.summary)
    assert not v.phases.get("build_in_worker"), (v.phases, v.flags)  # nothing compiled in the worker
    assert v.build is not None and v.build.seconds > 1.0
    assert v.kernelbench is not None and v.kernelbench.status == "correct"


BROKEN_INIT = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <Python.h>
static PyObject* twice(PyObject*, PyObject* x) { return PyObject_CallMethod(x, "mul", "d", undefined_scale); }
"""  # Python's C API alone: a compile error without torch/extension.h's 20-50 s of parsing


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="kp_test_broken_init", cpp_sources=SRC, no_implicit_headers=True)

    def forward(self, x):
        return self.ext.twice(x) + 1.0
'''


@pytest.mark.slow
def test_a_source_that_does_not_compile_fails_once(tmp_path: Path) -> None:
    """load_inline in __init__ of sources with a compile error: the build step's compile fails (reached on the
    meta device), and the worker raises the same error with the compiler's message at once instead of spending
    the GPU slot's time on the compiler again: ours build_error; KernelBench's its own (ModelNew() raised a
    RuntimeError: runtime_error)."""
    from kernelpilot.evaluation import EvalSettings, Evaluator

    (tmp_path / "problem.py").write_text(PROBLEM)
    token = uuid.uuid4().hex[:8]
    (tmp_path / "cand.py").write_text(BROKEN_INIT.replace("kp_test_", f"kp_test_{token}_"))
    settings = EvalSettings(device="cpu", confine=True, rules="kernelbench", trials=2, start_timeout_s=300,
                            test_timeout_s=600, build_timeout_s=600)
    with Evaluator(settings, workdir=tmp_path / "work", keep_warm=False) as ev:
        v = ev.evaluate(tmp_path / "problem.py", tmp_path / "cand.py", "test")
    assert v.status == "build_error", (v.status, v.summary)  # ours: its sources do not compile
    assert "undefined_scale" in v.error and "Error building extension" in v.error, v.error
    assert not v.phases.get("build_in_worker"), v.phases  # not compiled again in the worker
    assert v.kernelbench is not None and v.kernelbench.status == "runtime_error"


def test_compiler_errors_are_the_sources_not_the_machines() -> None:
    from kernelpilot.evaluation.build.load_inline import compiler_errors

    nvcc = ("[1/3] nvcc ... -c cuda.cu\nFAILED: cuda.cuda.o\ncuda.cu(12): error: identifier \"scale\" is undefined\n1 "
            "error detected")
    gcc = "main.cpp:3:48: error: 'undefined_scale' was not declared in this scope\nninja: build stopped"
    assert "identifier" in compiler_errors(nvcc) and "undefined_scale" in compiler_errors(gcc)
    assert compiler_errors("g++: fatal error: Killed signal terminated program cc1plus\nmain.cpp: error: x") == ""
    assert compiler_errors("ninja: build stopped: subcommand failed.") == ""


SLEEPY_COMPILE = '''
import time
import torch
import torch.nn as nn


def slow_backend(gm, example_inputs):  # stands in for Inductor's max-autotune: seconds of compiling
    time.sleep({seconds})
    return gm.forward


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = torch.compile(self._f, backend=slow_backend, dynamic=False)

    def _f(self, x):
        return x * 2.0 + 1.0

    def forward(self, x):
        return self.fn(x)
'''


def test_torch_compile_pauses_the_deadline_and_only_the_candidates_counts(tmp_path: Path) -> None:
    import torch

    from kernelpilot.evaluation.worker import compile_hook
    from kernelpilot.evaluation.worker import watchdog
    from kernelpilot.problem import load_problem

    sent: list[dict] = []
    dog = watchdog.Watchdog(sent.append, None)
    dog.allowance = watchdog.Allowance(build_s=321.0)
    watchdog.install(dog)
    try:
        torch._dynamo.reset()  # drops every callback: install_dynamo must add them back
        compile_hook.install_dynamo()
        compile_hook.install_dynamo()  # once only
        compile_hook.take()
        scope: dict = {}
        exec(SLEEPY_COMPILE.replace("{seconds}", "0.6"), scope)  # noqa: S102 - the candidate's code
        model = scope["ModelNew"]()
        dog.arm("verify", "candidate call", 5.0)
        model(torch.ones(3))
        arms = [(m["call"], m["allow_s"]) for m in sent]
        assert ("compile: torch.compile (dynamo)", 321.0) in arms, arms
        assert arms[-1][0] == "candidate call" and 4.8 < arms[-1][1] <= 5.0, arms  # the 0.6 s compile was not its time
        seconds, names = compile_hook.take()
        assert seconds >= 0.6 and len(names) == 1 and names[0].startswith("torch.compile"), names
        # the harness's own compile (the torch.compile baseline of the problem's Model): paused, not build time
        (tmp_path / "problem.py").write_text(PROBLEM)
        reference = load_problem(tmp_path / "problem.py").load_module().Model()
        baseline = torch.compile(reference, backend=scope["slow_backend"])
        baseline(torch.ones(3))
        assert any(m["call"] == "compile: torch.compile (dynamo)" for m in sent[len(arms):])  # paused all the same
        assert compile_hook.take() == (0.0, [])
    finally:
        watchdog.install(None)
        torch._dynamo.reset()


@pytest.mark.slow
def test_a_candidates_torch_compile_in_the_worker_is_build_time_not_a_hang(tmp_path: Path) -> None:
    from kernelpilot.evaluation import EvalSettings, Evaluator

    (tmp_path / "problem.py").write_text(PROBLEM)
    (tmp_path / "cand.py").write_text(SLEEPY_COMPILE.replace("{seconds}", "4.0"))
    (tmp_path / "slow.py").write_text(SLEEPY_COMPILE.replace("{seconds}", "4.0").replace(
        "        return self.fn(x)",
        "        time.sleep(4.0)  # not a compile: the call's own time\n        return self.fn(x)"))
    settings = EvalSettings(device="cpu", confine=True, rules="kernelbench", trials=2, call_floor_s=1.5,
                            first_call_s=1.0, start_timeout_s=300, test_timeout_s=600, build_timeout_s=600,
                            relaxed_policy=["*"])
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        v = ev.evaluate(tmp_path / "problem.py", tmp_path / "cand.py", "test")
        slow = ev.evaluate(tmp_path / "problem.py", tmp_path / "slow.py", "test")
    # a PyTorch rewrite (torch.compile's kernels are not its own), judged as one: not a timeout
    assert v.status == "rejected" and [f.rule for f in v.findings if f.severity == "reject"] == ["no-kernel"], v.summary
    assert v.kernelbench is not None and v.kernelbench.status == "correct"
    assert v.phases.get("build_in_worker", 0) >= 4.0, v.phases
    assert any(f.startswith("compiled inside the worker") and "torch.compile" in f for f in v.flags), v.flags
    assert slow.status == "timeout", (slow.status, slow.error)  # the allowances are tight: 4 s of its own is a hang
