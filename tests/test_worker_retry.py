"""A worker that dies while judging a candidate: the candidate is judged once more in a fresh worker;
dying once and then running is ``flaky`` (and counted as a crash of ours); dying twice is its own
``runtime_error``, with both attempts in the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings, Evaluator
from kernelpilot.evaluation.render import summary_line
from kernelpilot.verdict import Verdict

DATA = Path(__file__).parent / "data" / "cpu"
PROBLEM = DATA / "scaled_add.py"

CRASH_ONCE = '''
import ctypes
import os
from pathlib import Path

import torch
import torch.nn as nn

MARKER = Path(os.environ["KERNELPILOT_TEST_MARKER"])
if not MARKER.exists():  # the first import in any process: die as a broken extension load would
    MARKER.write_text("died once")
    ctypes.string_at(0)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return torch.add(y, x, alpha=self.scale)
'''

CRASH_ALWAYS = CRASH_ONCE.replace("if not MARKER.exists():", "if True:")


def _judge(ev: Evaluator, candidate: Path) -> Verdict:
    v = Verdict(status="ok")
    message = {"op": "evaluate", "problem": str(PROBLEM), "candidate_model": str(candidate), "mode": "test",
               "settings": ev.settings.to_dict()}
    response = ev._ask_once_more_if_it_died(message, 120, v)
    if response is not None:
        worker = Verdict.from_dict(response["verdict"])
        v.status, v.error, v.correctness = worker.status, worker.error, worker.correctness
    v.summary = summary_line(v)
    return v


@pytest.mark.slow
def test_a_death_on_import_is_retried_and_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_TEST_MARKER", str(tmp_path / "marker"))
    (tmp_path / "once.py").write_text(CRASH_ONCE)
    (tmp_path / "always.py").write_text(CRASH_ALWAYS)
    settings = EvalSettings(device="cpu", confine=False, allowed_libraries=["add"], start_timeout_s=300,
                            test_timeout_s=60)
    with Evaluator(settings, workdir=tmp_path / "work", spare_worker=True) as ev:
        once = _judge(ev, tmp_path / "once.py")
        assert once.status == "ok", once.error
        assert once.flaky and once.engine_crash
        assert len(once.attempts) == 1 and once.attempts[0].worker_died
        assert "SIGSEGV" in once.attempts[0].error and once.attempts[0].phase.startswith("import")
        assert any(f.startswith("retried in a fresh worker") and "ran without dying" in f for f in once.flags)
        assert "flaky" in once.summary

        always = _judge(ev, tmp_path / "always.py")
        assert always.status == "runtime_error" and "SIGSEGV" in always.error
        assert not always.flaky and not always.engine_crash
        assert len(always.attempts) == 1 and "SIGSEGV" in always.attempts[0].error
        assert "after a retry in a fresh worker" in always.summary
        # the evaluator still works after two deaths in a row
        (tmp_path / "marker").write_text("")
        assert _judge(ev, tmp_path / "once.py").status == "ok"


REFCOUNT = """
import ctypes, sys
from kernelpilot.extension_reload import forget_pybind11_module, pybind11_module_cache
api = ctypes.pythonapi
api.PyInterpreterState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
api.PyInterpreterState_GetDict.restype = ctypes.c_void_p
state = ctypes.cast(api.PyInterpreterState_GetDict(api.PyInterpreterState_Get()), ctypes.py_object).value
before = sys.getrefcount(state)
state["__pybind11_module_cache"] = {"ext": object()}
for _ in range(200):  # one call per extension library a long-lived worker loads
    forget_pybind11_module("ext")
    pybind11_module_cache()
print(before, sys.getrefcount(state), "__pybind11_module_cache" in state)
"""


def test_forgetting_a_pybind11_module_keeps_the_interpreter_dict_alive() -> None:
    """The cause of the warm worker's SIGSEGVs (2026-12-01/02): reading the interpreter's dict through
    ctypes with restype=py_object took one reference from it per call, until it was freed while in use."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", REFCOUNT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    before, after, present = r.stdout.split()
    assert after == before and present == "True"


def test_load_inline_names_positional_and_keyword(tmp_path: Path) -> None:
    from kernelpilot.evaluation.build.load_inline import inline_names

    src = tmp_path / "m.py"
    src.write_text("import json, torch\nfrom torch.utils import cpp_extension\nfrom torch.utils.cpp_extension import "
                   "load_inline\na = load_inline('attention', cpp_sources='')\nb = load_inline(name='custom_max_pool', "
                   "cpp_sources='')\nc = torch.utils.cpp_extension.load_inline(cpp_sources='', name='third')\n"
                   "d = cpp_extension.load('fourth', sources=[])\ne = torch.load('weights.pt')\n")
    assert inline_names(src) == ["attention", "custom_max_pool", "third", "fourth"]
