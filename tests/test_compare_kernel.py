"""The fused comparison (compare_kernel.py) against compare.py's torch passes, run by Triton's interpreter
on the CPU (the same kernels on the H200: tests/gpu/test_compare_gpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh process: Triton reads TRITON_INTERPRET when the kernels are defined.
SCRIPT = r"""
import json, math, os, sys
import torch
from kernelpilot.evaluation.correctness import compare as cmp
from kernelpilot.evaluation.correctness import fused_compare as ck
from kernelpilot.evaluation.correctness.verify import Tolerance

tol = Tolerance(1e-2, 1e-2, 1e-2)
floor = max(tol.atol, 1e-30)
g = torch.Generator().manual_seed(0)
n = 3 * ck.BLOCK + 77  # four blocks, the last one short
truth = torch.randn(n, generator=g, dtype=torch.float64) * 3
# values where rounding the truth straight to bf16 / fp16 differs from rounding it through fp32 (torch's way)
truth[:4] = torch.tensor([1 + 2**-8 + 2**-40, 1 + 2**-8 - 2**-40, 1 + 2**-11 + 2**-40, -(1 + 2**-8 + 2**-40)],
                         dtype=torch.float64)
rows = []
for dt in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
    ref = truth.to(dt)
    near = (truth + 0.001 * torch.randn(n, generator=g, dtype=torch.float64)).to(dt)
    far = near.clone()
    far[5::401] += 1.0
    holes = near.clone()
    holes[9::613] = float("nan")
    special = truth.clone()
    special[20], special[21], special[22], special[23] = float("inf"), float("nan"), 1e300, -float("inf")
    sref = special.to(dt)
    smatch = sref.clone()
    smiss = sref.clone()
    smiss[20] = 0.0
    cases = {"near": (near, ref, truth, 0.0), "far": (far, ref, truth, 0.0), "holes": (holes, ref, truth, 0.0),
             "special": (smatch, sref, special, 0.0), "special_missed": (smiss, sref, special, 0.0),
             "zero": (None, ref, truth, 0.0), "constant": (None, ref, truth, float(ref.double().mean())),
             "dtype_truth": (near, ref, ref, 0.0)}
    for name, (o, r, t, v) in cases.items():
        fused = ck.check(o, r, t, tol.atol, tol.rtol, floor, v)
        torch_path = cmp._torch_passes(o, r, t, tol, floor, v)
        rows.append({"dtype": str(dt), "case": name, "fused": fused, "torch": torch_path})
print(json.dumps(rows))
"""


def _close(a: float, b: float) -> bool:
    import math

    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def test_fused_passes_match_the_torch_passes_under_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 32
    for row in rows:
        fused, torch_path = row["fused"], row["torch"]
        assert fused.keys() == torch_path.keys()
        where = f"{row['dtype']} {row['case']}"
        # the element test is the same operation for operation: counts and maxima are equal, not close
        for key in ("mismatched", "unwritten", "max_abs", "max_rel", "slack"):
            assert fused[key] == torch_path[key] or _close(fused[key], torch_path[key]), (where, key, fused, torch_path)
        for key in ("err_sq", "ref_sq", "ref_err_sq"):  # sums in another order
            assert _close(fused[key], torch_path[key]), (where, key, fused, torch_path)
    by = {(r["dtype"], r["case"]): r["fused"] for r in rows}
    for dt in ("torch.bfloat16", "torch.float16", "torch.float32", "torch.float64"):
        assert by[(dt, "near")]["mismatched"] == 0
        assert by[(dt, "far")]["mismatched"] > 0
        assert by[(dt, "holes")]["unwritten"] == by[(dt, "holes")]["mismatched"] > 0
        assert by[(dt, "special")]["mismatched"] == 0 and by[(dt, "special_missed")]["mismatched"] == 1
        assert by[(dt, "zero")]["mismatched"] > 0


def test_compare_keeps_the_torch_path_off_cuda_and_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.evaluation.correctness import compare as cmp
    from kernelpilot.evaluation.correctness.verify import Tolerance

    tol = Tolerance(1e-4, 1e-4, 1e-5)
    truth = torch.linspace(-2, 2, 257, dtype=torch.float64)
    assert cmp._fused_compare(truth.float(), truth.float(), truth, tol, 1e-4, 0.0) is None  # a CPU tensor
    monkeypatch.setenv("KERNELPILOT_FUSED_COMPARE", "0")
    assert cmp._fused_compare(truth.float(), truth.float(), truth, tol, 1e-4, 0.0) is None
    assert cmp.compare(truth.float(), truth.float(), truth, tol)["passed"]


REPLAY = r"""
import json, torch
from kernelpilot.evaluation.correctness import compare as cmp
from kernelpilot.evaluation.correctness import fused_compare as ck

g = torch.Generator().manual_seed(3)
n = 2 * ck.BLOCK + 5
eager = torch.randn(n, generator=g, dtype=torch.float64)
eager[7], eager[8] = float("inf"), float("nan")  # not counted: eager is not finite there
rows = []
for dt in (torch.bfloat16, torch.float32):
    e = eager.to(dt)
    close = (eager + 1e-4 * torch.randn(n, generator=g, dtype=torch.float64)).to(dt)
    stale = torch.randn(n, generator=g, dtype=torch.float64).to(dt)
    holes = close.clone()
    holes[100::997] = float("nan")
    for name, c in {"close": close, "stale": stale, "holes": holes}.items():
        fused = ck.replay_parts(c, e, 1e-3, 1e-3)
        torch_path = cmp.replay_difference(c, e, 1e-3, 1e-3)  # CPU tensors: the torch path
        rows.append({"case": f"{dt} {name}", "fused": fused, "torch": list(torch_path)})
print(json.dumps(rows))
"""


def test_fused_replay_sums_match_the_torch_path_under_the_interpreter() -> None:
    import math

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", REPLAY], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 6
    for row in rows:
        diff_sq, norm_sq, holes, outside = row["fused"]
        err, off = row["torch"]
        assert int(outside) == off, row
        if holes:
            assert math.isinf(err), row
        else:
            assert _close(math.sqrt(diff_sq / norm_sq), err), row
    by = {r["case"]: r for r in rows}
    # a stale output is off nearly everywhere (over half of the 2 * BLOCK + 5 elements), a close one nowhere
    assert by["torch.float32 close"]["fused"][3] == 0 and by["torch.float32 stale"]["fused"][3] > 4096
    assert by["torch.bfloat16 holes"]["fused"][2] > 0
