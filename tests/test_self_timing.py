"""Candidates that time themselves: the signs found in their source, their untimed calls run with the GPU to
themselves (the GPU lock's exclusive hold, probed from a second descriptor inside forward), KernelBench's
column always so, and the report's reason when the two checks disagree on such a candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.static.self_timing import finding, signs
from test_kernelbench_score import _run

# every forward call writes 1 when nobody else could take the GPU lock at that moment (this process holds it
# exclusive), 0 when another process could share it
PROBING = """
import fcntl
import os
import time

import torch
import torch.nn as nn

LOCK, LOG = {lock!r}, {log!r}


def _alone():
    fd = os.open(LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)

    def forward(self, x):
        with open(LOG, "a") as log:
            log.write("1" if _alone() else "0")
        {timer}
        return torch.tanh(self.fc(x))
"""


def test_signs_in_the_model_file_and_its_own_imports(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nfrom time import perf_counter as clock\n"
                                   "def f():\n    s = torch.cuda.Event(enable_timing=True)\n    return "
                                   "s.elapsed_time(s)\n")
    assert set(signs(tmp_path / "a.py")) == {"time.perf_counter", "CUDA events (elapsed_time)"}
    (tmp_path / "kernels.py").write_text("import triton\n@triton.autotune(configs=[], key=['n'])\ndef k(n):\n    "
                                         "pass\n")
    (tmp_path / "b.py").write_text("import torch\nfrom kernels import k\nimport os.path\n"
                                   "torch.backends.cudnn.benchmark = True\n")
    assert set(signs(tmp_path / "b.py")) == {"cudnn.benchmark = True", "Triton's autotuner"}
    (tmp_path / "c.py").write_text("import time, torch\nt = time.time()\n"
                                   "f = torch.compile(lambda x: x, mode='max-autotune-no-cudagraphs')\n")
    assert set(signs(tmp_path / "c.py")) == {"time.time", "torch.compile(mode='max-autotune-no-cudagraphs')"}
    # words in comments and strings, cudnn.benchmark turned off, another directory's module: no sign
    (tmp_path / "d.py").write_text('"""we autotune by elapsed_time"""\n# perf_counter\nimport torch\n'
                                   "torch.backends.cudnn.benchmark = False\nimport json\n")
    assert signs(tmp_path / "d.py") == []
    (tmp_path / "e.py").write_text("def broken(:\n")
    assert signs(tmp_path / "e.py") == []  # its import fails and says why
    f = finding(["time.perf_counter"])
    assert f.rule == "self-timing" and f.severity == "warn" and "time.perf_counter" in f.message


def _evaluate(tmp_path: Path, timer: str, rules: str) -> tuple[dict, str]:
    """The probing candidate evaluated in-process (test_kernelbench_score's worker run), and its calls' log."""
    lock, log = tmp_path / "gpu.lock", tmp_path / "calls.log"
    log.write_text("")
    verdict = _run(tmp_path, PROBING.format(lock=str(lock), log=str(log), timer=timer), rules=rules)
    return verdict, log.read_text()


@pytest.fixture
def held_lock(tmp_path: Path):
    gpu_lock._current = gpu_lock.GpuLock(tmp_path / "gpu.lock")
    try:
        yield
    finally:
        gpu_lock._current.close()
        gpu_lock._current = None


def test_a_candidate_that_times_itself_runs_alone_others_share(tmp_path: Path, held_lock: None) -> None:
    v, calls = _evaluate(tmp_path, "t0 = time.perf_counter()", "kernelpilot")
    rules = {f["rule"]: f["severity"] for f in v["findings"]}
    assert rules.get("self-timing") == "warn"
    assert len(calls) >= 3 and set(calls) == {"1"}, calls  # every call (verify, audit) with the GPU to itself
    v, calls = _evaluate(tmp_path, "pass", "kernelpilot")
    assert "self-timing" not in {f["rule"] for f in v["findings"]}
    assert len(calls) >= 3 and set(calls) == {"0"}, calls  # untimed work shares the GPU


def test_kernelbench_column_always_runs_alone(tmp_path: Path, held_lock: None) -> None:
    v, calls = _evaluate(tmp_path, "pass", "kernelbench")
    assert v["kernelbench"]["status"] == "correct" and v["kernelbench"]["trials"] == "(5 / 5)"
    # ours first (shared), then KernelBench's five trials, each alone
    assert calls.endswith("0" + "1" * 5) and set(calls[:-5]) == {"0"}, calls


def test_the_report_names_self_timing_when_the_checks_disagree() -> None:
    from kernelpilot.suite.differences import classify
    from kernelpilot.verdict import Correctness, KernelBenchScore, Verdict

    def verdict(status: str, kb_status: str, self_timed: bool) -> Verdict:
        findings = [finding(["CUDA events (elapsed_time)"])] if self_timed else []
        return Verdict(status=status, problem="level1/1_Square_matrix_multiplication_", candidate="c.py",
                       findings=findings, correctness=Correctness(passed=status == "ok", atol=1e-4, rtol=1e-4),
                       kernelbench=KernelBenchScore(preset="v0.1", commit="129232e", precision="fp32",
                                                    tolerance=1e-2, status=kb_status, max_difference=["0.106842"]))

    d = classify(verdict("ok", "incorrect", True))
    assert d is not None and d.reason == "timing" and d.rules == ("self-timing",)
    assert "picks its path by timing itself (CUDA events (elapsed_time))" in d.detail
    d = classify(verdict("incorrect", "correct", True))
    assert d is not None and d.reason == "timing"
    d = classify(verdict("ok", "incorrect", False))
    assert d is not None and d.reason == "precision"
