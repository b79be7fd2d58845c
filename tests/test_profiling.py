"""Profiling: ncu report parsing and diagnosis on reports recorded on our H200, roofline, sanitizer
parsing, hotspot ranking and problem extraction on a real (CPU) script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelpilot.profiling import ProfileSummary
from kernelpilot.profiling.diagnosis import bound_of, diagnose, findings
from kernelpilot.profiling.ncu import CANDIDATE_RANGE, KernelProfile, build_command, parse_csv
from kernelpilot.profiling.roofline import build_roofline
from kernelpilot.profiling.sanitizer import parse_output

DATA = Path(__file__).parent / "data"


def test_parse_ncu_csv_recorded_on_h200() -> None:
    (k,) = parse_csv((DATA / "ncu" / "slow_scale_candidate.csv").read_text())
    assert k.name.startswith("slow_scale(")
    assert k.nvtx_range == CANDIDATE_RANGE
    assert k.launches == 2
    assert k.duration_us == pytest.approx(1632.5, rel=1e-3)  # ns in the report, µs here
    assert k.dram_pct_of_peak == pytest.approx(54.64, abs=0.01)
    assert k.registers_per_thread == 16
    assert (k.block_size, k.grid_size) == (256, 131072)
    assert k.load_bytes_per_sector == pytest.approx(4.0)  # 12.5% of a 32-byte sector
    assert k.top_stalls(1)[0][0] == "long_scoreboard"


def test_diagnosis_names_bound_stall_and_coalescing() -> None:
    (k,) = parse_csv((DATA / "ncu" / "slow_scale_candidate.csv").read_text())
    line = diagnose(k)
    assert line.startswith("memory-bound at 55% of DRAM peak")
    assert "long-scoreboard stalls dominate" in line
    assert "uncoalesced loads: 4 of 32 bytes" in line


def test_diagnosis_rules() -> None:
    idle = KernelProfile(name="k", dram_pct_of_peak=12, sm_pct_of_peak=20)
    assert bound_of(idle) == "latency-bound"
    math = KernelProfile(name="k", dram_pct_of_peak=30, sm_pct_of_peak=85, stalls={"math_pipe_throttle": 3.0})
    assert bound_of(math) == "compute-bound" and "math_pipe_throttle" not in diagnose(math)
    regs = KernelProfile(name="k", theoretical_occupancy_pct=25, achieved_occupancy_pct=24, registers_per_thread=168)
    assert any("168 registers" in f for f in findings(regs))
    small = KernelProfile(name="k", grid_size=64, block_size=256)
    assert any("only 64 blocks" in f for f in findings(small))
    good = KernelProfile(name="k", dram_pct_of_peak=91, sm_pct_of_peak=30, load_bytes_per_sector=32,
                         store_bytes_per_sector=32, theoretical_occupancy_pct=100, achieved_occupancy_pct=90,
                         grid_size=1024, block_size=256)
    assert findings(good) == []


def test_ncu_command_is_focused_and_leaves_clocks_alone() -> None:
    cmd = build_command(["python", "t.py"], ncu="ncu", launch_count=8)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert "--nvtx-include" in cmd and "kp_candidate/" in cmd and "kp_baseline/" in cmd
    assert cmd[cmd.index("--launch-count") + 1] == "8"
    assert cmd[-2:] == ["python", "t.py"]


def test_summary_text_is_short_and_says_its_source() -> None:
    kernels = parse_csv((DATA / "ncu" / "slow_scale_candidate.csv").read_text()) * 12
    roof = build_roofline(bytes_moved=2 * 4096 * 8192 * 4, flops=None, ceiling_tbps=4.25, ceiling_tflops=790,
                          times_ms={"candidate": 1.63, "torch.compile": 0.137})
    text = ProfileSummary("ncu", kernels, kernels, roof).text()
    assert text.splitlines()[0].startswith("profile source: ncu")
    assert len(text.splitlines()) <= 40
    assert "diagnosis:" in text


def test_full_text_details_the_baseline_and_has_no_line_limit() -> None:
    kernels = parse_csv((DATA / "ncu" / "slow_scale_candidate.csv").read_text())
    summary = ProfileSummary("ncu", kernels * 12, kernels, None)
    full = summary.full_text()
    baseline = full[full.index("torch.compile baseline"):]
    assert "diagnosis:" in baseline and "regs/thread" in baseline  # text() keeps the baseline to two lines
    assert len(full.splitlines()) > 40 and len(summary.text().splitlines()) <= 40


def test_roofline_from_a_benchmark_verdict() -> None:
    from kernelpilot.profiling.roofline import roofline_from_verdict

    verdict = {"speed_of_light": {"bytes_moved": 2 << 30, "flops": None, "ceiling_tbps": 4.25, "ceiling_tflops": 790.0},
               "performance": {"candidate": {"median_ms": 0.6}, "compiled": {"median_ms": 1.2}, "eager": None}}
    roof = roofline_from_verdict(verdict)
    assert roof is not None and roof.bound == "memory"
    assert [round(p.pct_of_ceiling) for p in roof.points[:2]] == [84, 42]
    assert roofline_from_verdict({"status": "incorrect"}) is None


def test_roofline_memory_bound_percentages() -> None:
    nbytes = 2 * 1024**3
    roof = build_roofline(bytes_moved=nbytes, flops=nbytes // 2, ceiling_tbps=4.0, ceiling_tflops=800,
                          times_ms={"candidate": nbytes / 3.6e12 * 1e3, "torch.compile": nbytes / 1.8e12 * 1e3})
    assert roof.bound == "memory"
    cand, comp = roof.points
    assert cand.pct_of_ceiling == pytest.approx(90.0)
    assert comp.pct_of_ceiling == pytest.approx(45.0)
    assert roof.floor_ms == pytest.approx(nbytes / 4e12 * 1e3)
    assert "90% of ceiling" in roof.text()
    assert len(roof.bars(20)[0].split()[1]) == 20


def test_roofline_compute_bound_gemm() -> None:
    m = n = k = 8192
    roof = build_roofline(bytes_moved=3 * m * n * 2, flops=2 * m * n * k, ceiling_tbps=4.25, ceiling_tflops=790,
                          times_ms={"candidate": 2 * m * n * k / 632e12 * 1e3})
    assert roof.bound == "compute"
    assert roof.points[0].pct_of_ceiling == pytest.approx(80.0)


MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write(float *, int)+0x70 in /tmp/cand/kernel.cu:9
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f3e5a000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3e5a000000 of size 4000 bytes
=========
========= ERROR SUMMARY: 1 error
"""


def test_parse_memcheck_report() -> None:
    (f,) = parse_output(MEMCHECK, "memcheck")
    assert f.message == "Invalid __global__ write of size 4 bytes"
    assert f.kernel == "oob_write(float *, int)"
    assert (f.file, f.line) == ("/tmp/cand/kernel.cu", 9)
    assert (f.thread, f.block) == ("232,0,0", "3,0,0")
    assert "out of bounds" in f.detail
    assert parse_output("========= ERROR SUMMARY: 0 errors\n", "memcheck") == []


def test_hotspots_rank_and_extract_a_working_problem(tmp_path: Path) -> None:
    from kernelpilot.profiling.hotspots import hotspots_command

    out = tmp_path / "problems"
    args = SimpleNamespace(script=str(DATA / "hotspots" / "tiny_block.py"), args=[], steps=5, top=10,
                           extract=1, out=str(out))
    assert hotspots_command(args) == 0
    (problem,) = out.glob("*.py")
    # The extracted file is a KernelBench problem that runs on its own and matches the recorded op.
    code = (
        "import importlib.util, torch, sys\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(problem)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "model = m.Model(*m.get_init_inputs()); y = model(*m.get_inputs())\n"
        "y = y[0] if isinstance(y, (tuple, list)) else y  # an op with several outputs keeps them all\n"
        "print(type(y).__name__, tuple(y.shape))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Tensor")
    from kernelpilot.problem import load_problem

    load_problem(problem)  # passes the static KernelBench check


def test_hotspots_steps_stop_the_script_early() -> None:
    from kernelpilot.profiling.hotspots import HotspotRecorder

    rec = HotspotRecorder(steps=3)
    rec.run_script(DATA / "hotspots" / "tiny_block.py", [])
    layer_norms = [e for e in rec.ranked() if e.op == "aten::native_layer_norm"]
    assert sum(e.calls for e in layer_norms) == 3


def test_sanitizer_gate_can_be_turned_off_and_needs_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.profiling.sanitizer import gate_available

    monkeypatch.setenv("KERNELPILOT_SANITIZE", "0")
    assert gate_available() is False
    monkeypatch.delenv("KERNELPILOT_SANITIZE")
    if not torch.cuda.is_available():
        assert gate_available() is False  # no GPU: approval is not blocked by a check that cannot run


def test_uses_shared_memory_decides_racecheck(tmp_path: Path) -> None:
    from kernelpilot.profiling.sanitizer import uses_shared_memory

    assert uses_shared_memory(DATA / "profiling" / "racy")
    assert not uses_shared_memory(DATA / "candidates" / "vector_scale")
