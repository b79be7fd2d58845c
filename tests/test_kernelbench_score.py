"""One evaluation, two scores (CPU worker): KernelBench's own verdict beside ours, torch's global switches
a candidate changes (listed, the reference run in the default state, restored after), PyTorch rewrites."""

from __future__ import annotations

from pathlib import Path

import pytest

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)

    def forward(self, x):
        return torch.tanh(self.fc(x))

def get_inputs():
    return [torch.rand(8, 32)]

def get_init_inputs():
    return []
"""

REWRITE = """
import torch
import torch.nn as nn

{prelude}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)

    def forward(self, x):
        return torch.tanh(torch.addmm(self.fc.bias, x, self.fc.weight.t())){tail}
"""


def _run(tmp_path: Path, candidate: str, rules: str = "kernelbench") -> dict:
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "c.py").write_text(candidate)
    settings = EvalSettings(device="cpu", confine=False, rules=rules, trials=2)
    msg = {"op": "evaluate", "problem": str(tmp_path / "p.py"), "candidate_model": str(tmp_path / "c.py"),
           "candidate_dir": str(tmp_path), "mode": "test", "settings": settings.to_dict(), "own_kernels": [],
           "kind": "pytorch"}
    worker = Worker("cpu")
    out = worker.evaluate(msg)["verdict"]
    assert worker.tidy()  # as the worker's loop does after sending the answer, before reading the next request
    out["_state_after"] = __import__("kernelpilot.evaluation.worker.global_state",
                                     fromlist=["Snapshot"]).Snapshot.take()
    out["_initial"] = worker.initial_state
    return out


def _rules(v: dict) -> dict[str, str]:
    return {f["rule"]: f["severity"] for f in v["findings"]}


def test_a_pytorch_rewrite_gets_both_scores(tmp_path: Path) -> None:
    v = _run(tmp_path, REWRITE.format(prelude="", tail=""))
    assert v["status"] == "rejected" and _rules(v)["no-kernel"] == "reject"  # ours: no kernel of its own
    assert _rules(v).get("torch-op-allowed", "warn") == "warn"
    kb = v["kernelbench"]
    assert kb["status"] == "correct" and kb["correctness"] and kb["trials"] == "(5 / 5)"
    assert kb["preset"] == "current" and kb["tolerance"] == 1e-4 and kb["runtime_ms"] is None  # test mode: no timing


def test_global_switches_are_listed_precision_lowering_judged_and_state_restored(tmp_path: Path) -> None:
    prelude = "torch.backends.cudnn.benchmark = True\ntorch.set_float32_matmul_precision('medium')"
    v = _run(tmp_path, REWRITE.format(prelude=prelude, tail=""), rules="kernelpilot")
    found = _rules(v)
    assert found["global-state"] == "warn" and found["precision-lowered"] == "reject"
    evidence = next(f["evidence"] for f in v["findings"] if f["rule"] == "global-state")
    assert "cudnn_benchmark: False -> True" in evidence and "float32_matmul_precision: highest -> medium" in evidence
    assert v["_state_after"] == v["_initial"]  # the next candidate starts from the problem's own state
    kb = _run(tmp_path, REWRITE.format(prelude=prelude, tail=""))  # under KernelBench's rules: listed, not refused
    assert _rules(kb)["precision-lowered"] == "warn"
    assert any("ran in the candidate's global state" in n for n in kb["kernelbench"]["notes"])


FLIPS_IN_FORWARD = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)
        self.ready = False

    def forward(self, x):
        if not self.ready:  # on its first call only, as some published solutions do
            torch.set_float32_matmul_precision("medium")
            self.ready = True
        self.seen = torch.get_float32_matmul_precision()
        return torch.tanh(torch.addmm(self.fc.bias, x, self.fc.weight.t()))
"""


def test_switches_flipped_inside_forward_are_caught_and_kept_its_own(tmp_path: Path) -> None:
    v = _run(tmp_path, FLIPS_IN_FORWARD, rules="kernelpilot")
    found = {f["rule"]: f for f in v["findings"]}
    assert found["global-state"]["severity"] == "warn" and "inside forward" in found["global-state"]["message"]
    assert "float32_matmul_precision: highest -> medium" in found["global-state"]["evidence"]
    assert found["precision-lowered"]["severity"] == "reject"
    assert v["_state_after"] == v["_initial"]


PUTS_BACK_WHEN_DELETED = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)
        self.me = self  # a reference cycle: only the garbage collector frees it

    def forward(self, x):
        return torch.tanh(torch.addmm(self.fc.bias, x, self.fc.weight.t()))

    def __del__(self):  # "restores" a switch it never changed, as some published solutions do
        torch.set_float32_matmul_precision("medium")
        torch._kp_test_deleted = True
"""


def test_a_candidates_del_runs_before_the_state_is_restored(tmp_path: Path) -> None:
    import torch

    torch._kp_test_deleted = False
    try:
        v = _run(tmp_path, PUTS_BACK_WHEN_DELETED, rules="kernelpilot")
        assert torch._kp_test_deleted  # collected with the evaluation, not later inside another candidate's
        assert v["_state_after"] == v["_initial"]
    finally:
        del torch._kp_test_deleted
        torch.set_float32_matmul_precision("highest")


def test_guarded_keeps_the_candidates_state_to_itself() -> None:
    import torch

    from kernelpilot.evaluation.worker.global_state import Guarded, Snapshot

    default = Snapshot.take()
    seen: list[str] = []

    def forward() -> None:
        seen.append(torch.get_float32_matmul_precision())
        if len(seen) == 1:
            torch.set_float32_matmul_precision("medium")

    call = Guarded(forward, default)
    call()
    assert Snapshot.take() == default and len(call.changed) == 1  # undone after the call, and listed
    call()
    assert seen == ["highest", "medium"]  # its later calls run in the state it set
    assert Snapshot.take() == default and len(call.changed) == 1


def test_kernelbench_statuses_for_broken_candidates(tmp_path: Path) -> None:
    wrong = _run(tmp_path, REWRITE.format(prelude="", tail=" + 1e-3"))
    assert wrong["status"] == "rejected" and not wrong["correctness"]["passed"]  # ours: no-kernel, and wrong
    assert wrong["kernelbench"]["status"] == "incorrect"
    assert wrong["kernelbench"]["trials"] == "(0 / 5)" and len(wrong["kernelbench"]["max_difference"]) == 5
    v01 = _run(tmp_path, REWRITE.format(prelude="", tail=" + 1e-3"), rules="kernelbench-v0.1")
    assert v01["kernelbench"]["status"] == "correct" and v01["kernelbench"]["tolerance"] == 1e-2  # v0.1: 1e-2
    broken = _run(tmp_path, "import torch\nraise RuntimeError('nvcc failed')\n")
    assert broken["status"] == "runtime_error"
    assert broken["kernelbench"]["status"] == "compile_error" and not broken["kernelbench"]["compiled"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_harness_precision_cast(tmp_path: Path, precision: str) -> None:
    from kernelpilot.evaluation.kernelbench import harness as kbh
    from kernelpilot.rules import get_rules

    import importlib.util

    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "c.py").write_text(REWRITE.format(prelude="", tail=""))
    mods = []
    for name in ("p", "c"):
        spec = importlib.util.spec_from_file_location(f"kbtest_{name}", tmp_path / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    out = kbh.score(mods[0], mods[1].ModelNew, get_rules("kernelbench").harness, precision, "cpu", False)
    assert out["status"] == "correct" and out["tolerance"] == (1e-4 if precision == "fp32" else 1e-2)
