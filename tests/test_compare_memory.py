"""The comparison in bounded memory (compare.py), the OOM report's parsing (memory.py) and the native
frames of a crash (native_trace.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelpilot.evaluation.correctness import compare as cmp
from kernelpilot.evaluation.worker import memory
from kernelpilot.evaluation.worker import crash_frames as native_trace
from kernelpilot.evaluation.correctness.verify import Tolerance

FP32 = Tolerance(1e-4, 1e-4, 1e-5)


def _cases() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    truth = torch.randn(1000, generator=g, dtype=torch.float64) * 10
    ref = truth.float()
    good = (truth + 1e-7 * torch.randn(1000, generator=g, dtype=torch.float64)).float()
    wrong = good.clone()
    wrong[::97] += 1.0
    holes = good.clone()
    holes[5:9] = float("nan")
    inf_truth = truth.clone()
    inf_truth[3] = float("inf")
    inf_ref = inf_truth.float()
    return [(good, ref, truth), (wrong, ref, truth), (holes, ref, truth), (inf_ref.clone(), inf_ref, inf_truth)]


@pytest.mark.parametrize("index", range(4))
def test_chunked_comparison_equals_one_piece(monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    out, ref, truth = _cases()[index]
    whole = cmp.compare(out, ref, truth, FP32)
    monkeypatch.setattr(cmp, "CHUNK", 7)  # 143 chunks, the last one short
    chunked = cmp.compare(out, ref, truth, FP32)
    assert chunked["passed"] == whole["passed"]
    assert chunked["mismatched"] == whole["mismatched"] and chunked["unwritten"] == whole["unwritten"]
    for key in ("normalized_error", "max_abs_error", "reference_normalized_error"):
        assert chunked[key] == pytest.approx(whole[key], rel=1e-9, abs=1e-12)
    assert [c["passed"] for c in (whole,)] == [index in (0, 3)]


def test_constant_outputs_are_checked_without_being_materialised() -> None:
    truth = torch.linspace(-3, 3, 500, dtype=torch.float64)
    ref = truth.float()
    zeros, consts = cmp.trivial_outputs(ref, None)
    assert zeros == [0.0] and consts is not None and consts[0] == pytest.approx(0.0, abs=1e-6)
    assert not cmp.compare_all(zeros, ref, truth, FP32)["passed"]
    assert cmp.compare(0.0, torch.zeros(4), torch.zeros(4, dtype=torch.float64), FP32)["passed"]
    # a bf16 reference: the constant is rounded as a bf16 kernel would write it
    bf = torch.full((8,), 1.001, dtype=torch.bfloat16)
    assert cmp.compare(1.001, bf, bf.double(), Tolerance(0.0, 0.0, 0.0))["passed"]


def test_normalized_difference_is_chunked_and_sees_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    e = torch.randn(100)
    c = e + 0.01 * torch.randn(100)
    whole = cmp.normalized_difference(c, e)
    monkeypatch.setattr(cmp, "CHUNK", 9)
    assert cmp.normalized_difference(c, e) == pytest.approx(whole, rel=1e-9)
    c[4] = float("nan")
    assert cmp.normalized_difference(c, e) == float("inf")


def test_out_of_memory_message_and_report() -> None:
    text = "CUDA out of memory. Tried to allocate 12.50 GiB. GPU 0 has a total capacity of 139.8 GiB"
    assert memory.requested_bytes(text) == int(12.5 * 2**30)
    assert memory.requested_bytes("Tried to allocate 20.00 MiB") == 20 * 2**20
    assert memory.requested_bytes("no size here") is None
    memory.note_call("verify: candidate call, trial 1 of 5")
    rep = memory.report(text)
    assert rep["requested_bytes"] == int(12.5 * 2**30) and rep["phase"].startswith("verify")
    assert "asked for 12.5 GiB" in memory.describe(rep)


def test_native_frames_precede_the_python_stack(tmp_path: Path) -> None:
    lib = native_trace.library(tmp_path)
    if lib is None:
        pytest.skip("no C compiler on this machine")
    code = ("import faulthandler, ctypes; faulthandler.enable()\n"
            "from kernelpilot.evaluation.worker import crash_frames as native_trace\n"
            f"assert native_trace.install({str(lib)!r})\n"
            "ctypes.string_at(0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert f"{native_trace.MARKER} signal 11" in r.stderr
    assert "libc.so" in r.stderr and "Fatal Python error: Segmentation fault" in r.stderr
    assert r.stderr.index(native_trace.MARKER) < r.stderr.index("Fatal Python error")


def test_timing_samples_follow_the_time_budget() -> None:
    from dataclasses import replace

    from kernelpilot.evaluation.settings import EvalSettings
    from kernelpilot.evaluation.timing.candidate import timing_settings

    s = EvalSettings(rounds=5, samples_per_round=20, time_budget_s=1.5)
    assert timing_settings(s, 0.001).samples_per_round == 20  # 1 ms: the full 100 samples (0.1 s)
    assert timing_settings(s, 0.03).samples_per_round == 10  # 30 ms: 50 samples, 1.5 s
    assert timing_settings(s, 0.08).samples_per_round == 4  # 80 ms: never below 4 a round
    assert timing_settings(replace(s, time_budget_s=0), 0.08).samples_per_round == 20  # budget off
    assert timing_settings(s).samples_per_round == 20  # call time unknown


def test_replay_check_tells_a_near_zero_output_from_a_stale_one() -> None:
    """The timing phase's replay check: an output whose norm is near zero (the mean after a group norm,
    KernelBench level 2 problem 23) has a large normalised error from rounding alone and must pass; a
    result of other inputs (a cache) must still fail, and so must NaN where eager has none."""
    from kernelpilot.evaluation.timing.candidate import _replay_check
    from kernelpilot.evaluation.correctness.verify import Tolerance

    tol = Tolerance(1e-4, 1e-4, 1e-5)
    check = _replay_check("cpu", tol)
    torch.manual_seed(0)
    eager = torch.randn(128, dtype=torch.float64).float() * 1e-8  # means of normalised groups: rounding-level
    cand = eager + torch.randn(128) * 1e-8
    assert cmp.normalized_difference(cand, eager) > 0.5  # the old check failed here
    assert check(cand, eager) == ""
    assert check((cand, torch.ones(3)), (eager, torch.ones(3))) == ""
    # a stale result: another input's output on a normal-sized output
    x, y = torch.randn(4096), torch.randn(4096)
    msg = check(2 * y, 2 * x)
    assert "differs from eager" in msg and "outside" in msg
    # a cached output of a near-zero problem with one element replaced by a wrong value is still caught
    bad = cand.clone()
    bad[7] = 1.0
    assert "differs from eager" in check(bad, eager)
    nan = cand.clone()
    nan[3] = float("nan")
    assert "NaN" in check(nan, eager)
    # without a tolerance the check is the plain normalised one, as before
    assert "differs from eager" in _replay_check("cpu")(cand, eager)


def test_replay_difference_counts_outside_the_band_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    e = torch.randn(1000)
    c = e.clone()
    c[::100] += 1.0  # ten elements off by 1
    whole = cmp.replay_difference(c, e, 1e-3, 1e-3)
    monkeypatch.setattr(cmp, "CHUNK", 7)
    err, off = cmp.replay_difference(c, e, 1e-3, 1e-3)
    assert off == 10 == whole[1] and err == pytest.approx(whole[0], rel=1e-9)
    e[5] = float("inf")  # non-finite eager elements are skipped, not counted
    c[5] = 0.0
    assert cmp.replay_difference(c, e, 1e-3, 1e-3)[1] == 10
