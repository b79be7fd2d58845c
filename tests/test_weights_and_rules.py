"""How ModelNew gets Model's weights (by name, else by seed, as KernelBench does), and the rule sets'
static split (what still refuses under a KernelBench preset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.static.policy import check_candidate
from kernelpilot.rules import RULESETS, get_rules

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

def get_inputs():
    return [torch.randn(4, 16)]

def get_init_inputs():
    return []
"""

FORWARD = """
    def forward(self, x):
        h = torch.relu(torch.nn.functional.linear(x, self.{w1}, self.{b1}))
        return torch.nn.functional.linear(h, self.{w2}, self.{b2})
"""

SAME_NAMES = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)
""" + FORWARD.format(w1="fc1.weight", b1="fc1.bias", w2="fc2.weight", b2="fc2.bias")

RENAMED_SAME_ORDER = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 32)   # renamed, created in Model's order: the same draws from the seed
        self.second = nn.Linear(32, 8)
""" + FORWARD.format(w1="first.weight", b1="first.bias", w2="second.weight", b2="second.bias")

RENAMED_OTHER_ORDER = RENAMED_SAME_ORDER.replace(
    "        self.first = nn.Linear(16, 32)   # renamed, created in Model's order: the same draws from the seed\n"
    "        self.second = nn.Linear(32, 8)\n",
    "        self.second = nn.Linear(32, 8)\n        self.first = nn.Linear(16, 32)\n")


def _verdict(tmp_path: Path, candidate: str) -> dict:
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "c.py").write_text(candidate)
    settings = EvalSettings(device="cpu", confine=False, rules="kernelbench", trials=2)
    msg = {"op": "evaluate", "problem": str(tmp_path / "p.py"), "candidate_model": str(tmp_path / "c.py"),
           "candidate_dir": str(tmp_path), "mode": "test", "settings": settings.to_dict(), "own_kernels": []}
    return Worker("cpu").evaluate(msg)["verdict"]


@pytest.mark.parametrize("candidate,status,weights", [
    (SAME_NAMES, "ok", "by name"),
    (RENAMED_SAME_ORDER, "ok", "by seed"),
    (RENAMED_OTHER_ORDER, "incorrect", "by seed"),
])
def test_weights_by_name_else_by_seed(tmp_path: Path, candidate: str, status: str, weights: str) -> None:
    v = _verdict(tmp_path, candidate)
    assert v["status"] == status, v.get("error")
    assert v["correctness"]["weights"] == weights


def test_rule_sets_and_their_static_split(tmp_path: Path) -> None:
    assert set(RULESETS) == {"kernelpilot", "kernelbench", "kernelbench-v0.1"}
    assert get_rules("kernelbench").harness.tolerance("fp32") == 1e-4
    assert get_rules("kernelbench-v0.1").harness.tolerance("fp32") == 1e-2
    assert not get_rules("kernelbench-v0.1").harness.l2_flush and get_rules("kernelbench").harness.l2_flush
    with pytest.raises(KernelpilotError, match="use one of kernelpilot, kernelbench"):
        get_rules("kernelbench-v2")
    src = tmp_path / "m.py"
    src.write_text(
        "import os\nimport torch\nimport torch.nn as nn\n"
        "os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n"
        "torch.backends.cudnn.benchmark = True\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        try:\n            return x * 2\n        except Exception:\n            return x\n")
    default = {(f.rule, f.severity) for f in check_candidate(src)}
    assert ("import-os", "reject") in default and ("try-fallback", "reject") in default
    kb = {(f.rule, f.severity) for f in check_candidate(src, rules="kernelbench")}
    assert ("import-os", "warn") in kb and ("try-fallback", "warn") in kb and ("module-patch", "warn") in kb
    assert all(sev == "warn" for _, sev in kb)  # listed, refusing nothing by themselves
    # and each says so, rather than "is refused" beside an ok verdict
    assert all("kernelbench rules this is listed, not refused" in f.message
               for f in check_candidate(src, rules="kernelbench"))
    assert not any("listed, not refused" in f.message for f in check_candidate(src))
    src.write_text("import os\nimport ctypes\nos.system('nvidia-smi')\nfrom os import fork\nfork()\n")
    refused = {f.rule for f in check_candidate(src, rules="kernelbench") if f.severity == "reject"}
    assert refused == {"import-ctypes", "process-creation"}
