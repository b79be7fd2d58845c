"""The fused comparison on the GPU (compare_kernel.py): every count and maximum equal to the torch passes,
the norms equal up to summation order, the 64-bit offsets of outputs past 2^31 elements, and compare()
taking the fused path for CUDA float outputs."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu


def _cases(torch, n: int):  # noqa: ANN001, ANN202
    g = torch.Generator(device="cuda").manual_seed(1)
    truth = torch.randn(n, generator=g, device="cuda", dtype=torch.float64) * 3
    truth[:4] = torch.tensor([1 + 2**-8 + 2**-40, 1 + 2**-8 - 2**-40, 1 + 2**-11 + 2**-40, -(1 + 2**-8 + 2**-40)],
                             dtype=torch.float64, device="cuda")
    for dt in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        ref = truth.to(dt)
        near = (truth + 1e-3 * torch.randn(n, generator=g, device="cuda", dtype=torch.float64)).to(dt)
        far = near.clone()
        far[5::4001] += 1.0
        holes = near.clone()
        holes[9::6007] = float("nan")
        special = truth.clone()
        special[20:24] = torch.tensor([float("inf"), float("nan"), 1e300, -float("inf")], device="cuda",
                                      dtype=torch.float64)
        sref = special.to(dt)
        miss = sref.clone()
        miss[20] = 0.0
        yield dt, {"near": (near, ref, truth, 0.0), "far": (far, ref, truth, 0.0), "holes": (holes, ref, truth, 0.0),
                   "special": (sref.clone(), sref, special, 0.0), "special_missed": (miss, sref, special, 0.0),
                   "zero": (None, ref, truth, 0.0), "constant": (None, ref, truth, float(ref.double().mean())),
                   "dtype_truth": (near, ref, ref, 0.0)}


def test_fused_passes_equal_the_torch_passes() -> None:
    import torch

    from kernelpilot.evaluation.correctness import compare as cmp
    from kernelpilot.evaluation.correctness import fused_compare as ck
    from kernelpilot.evaluation.correctness.verify import Tolerance

    tol = Tolerance(1e-2, 1e-2, 1e-2)
    floor = max(tol.atol, 1e-30)
    for dt, cases in _cases(torch, 5_000_003):
        for name, (o, r, t, v) in cases.items():
            fused = ck.check(o, r, t, tol.atol, tol.rtol, floor, v)
            slow = cmp._torch_passes(o, r, t, tol, floor, v)
            for key in ("mismatched", "unwritten", "max_abs", "max_rel", "slack"):
                assert fused[key] == slow[key], (dt, name, key, fused, slow)
            for key in ("err_sq", "ref_sq", "ref_err_sq"):
                a, b = fused[key], slow[key]
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12), (dt, name, key, a, b)
            if name in ("far", "special_missed", "zero"):
                assert fused["mismatched"] > 0, (dt, name)


def test_compare_takes_the_fused_path_and_gives_the_same_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.evaluation.correctness import compare as cmp
    from kernelpilot.evaluation.correctness.verify import Tolerance

    tol = Tolerance(1e-2, 1e-2, 1e-2)
    calls: list[int] = []
    real = cmp._torch_passes
    monkeypatch.setattr(cmp, "_torch_passes", lambda *a, **k: calls.append(1) or real(*a, **k))
    for dt, cases in _cases(torch, 1_000_001):
        for name, (o, r, t, v) in cases.items():
            fast = cmp.compare(v if o is None else o, r, t, tol)
            assert not calls, (dt, name)  # no torch pass ran
            monkeypatch.setenv("KERNELPILOT_FUSED_COMPARE", "0")
            slow = cmp.compare(v if o is None else o, r, t, tol)
            monkeypatch.delenv("KERNELPILOT_FUSED_COMPARE")
            calls.clear()
            assert (fast["passed"], fast["mismatched"], fast["unwritten"], fast["message"]) == \
                   (slow["passed"], slow["mismatched"], slow["unwritten"], slow["message"]), (dt, name)


def test_outputs_past_two_to_the_31_elements() -> None:
    import torch

    from kernelpilot.evaluation.correctness import fused_compare as ck

    n = (1 << 31) + 4099
    if torch.cuda.mem_get_info()[0] < n * (2 + 2 + 8) + (4 << 30):
        pytest.skip("needs about 30 GB of free GPU memory")
    truth = torch.zeros(n, dtype=torch.float64, device="cuda")
    ref = torch.zeros(n, dtype=torch.bfloat16, device="cuda")
    out = torch.zeros(n, dtype=torch.bfloat16, device="cuda")
    out[-3:] = 1.0  # only past 2^31: a kernel with 32-bit offsets would miss them (or fault)
    out[(1 << 31) + 7] = float("nan")
    res = ck.check(out, ref, truth, 1e-2, 1e-2, 1e-2, 0.0)
    assert res["mismatched"] == 4 and res["unwritten"] == 1 and res["max_abs"] == 1.0


def test_replay_difference_fused_on_cuda_equals_the_torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.evaluation.correctness import compare as cmp

    g = torch.Generator(device="cuda").manual_seed(2)
    eager = torch.randn(3_000_017, generator=g, device="cuda").to(torch.bfloat16)
    eager[11] = float("inf")
    stale = torch.randn(3_000_017, generator=g, device="cuda").to(torch.bfloat16)
    close = eager.clone()
    close[5::999] += 1.0
    for cand in (close, stale, eager):
        fused = cmp.replay_difference(cand, eager, 1e-3, 1e-3)
        monkeypatch.setenv("KERNELPILOT_FUSED_COMPARE", "0")
        slow = cmp.replay_difference(cand, eager, 1e-3, 1e-3)
        monkeypatch.delenv("KERNELPILOT_FUSED_COMPARE")
        assert fused[1] == slow[1] and fused[0] == pytest.approx(slow[0], rel=1e-9, abs=1e-12), (fused, slow)
    assert cmp.replay_difference(close, eager, 1e-3, 1e-3)[1] == len(range(5, 3_000_017, 999))
