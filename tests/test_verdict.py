"""The Verdict schema (round trip, tiers) and its renderings (terminal report, summary, model view)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kernelpilot.evaluation.render import for_model, render_text, summary_line
from kernelpilot.verdict import (
    SCHEMA_VERSION, STATUSES, BuildReport, Correctness, Diagnostic, Environment, Finding, KernelResources,
    Performance, SpeedOfLight, Timing, TrialResult, Verdict, tier_for,
)

DATA = Path(__file__).parent / "data" / "verdicts"


def full_verdict() -> Verdict:
    timing = Timing(median_ms=0.5, q1_ms=0.49, q3_ms=0.52, min_ms=0.48, samples=100, host_median_ms=0.53,
                    round_medians_ms=[0.5, 0.51, 0.49])
    return Verdict(
        status="ok", problem="softmax.py", candidate="kernels/softmax", mode="benchmark",
        build=BuildReport(ok=True, seconds=1.2, rebuilt=["kernel.cu"],
                          diagnostics=[Diagnostic("warning", "unused variable", "kernel.cu", 3, 7, "nvcc")],
                          kernels=[KernelResources("softmax_kernel", "sm_90", 32, 4096, 0, 0, 0)]),
        correctness=Correctness(passed=True, atol=1e-2, rtol=1e-2, max_normalized_error=1e-2, deterministic=True,
                                inputs_unmodified=True, fully_written=True, discriminates=True,
                                trials=[TrialResult(seed=42000, distribution="normal", order="candidate_first",
                                                    passed=True, normalized_error=2e-3, total=10)]),
        findings=[Finding(rule="torch-compute-op", message="small op", severity="warn", evidence="aten.mul")],
        performance=Performance(candidate=timing, eager=Timing(1.0, 0.9, 1.1, 0.9, 100),
                                compiled=Timing(0.8, 0.7, 0.9, 0.7, 100),
                                speedup_vs_eager=2.0, speedup_vs_compile=1.6, noise_pct=1.0,
                                tier="faster_than_compile"),
        speed_of_light=SpeedOfLight(bytes_moved=2 << 30, floor_ms=0.4, bound="memory", pct_of_ceiling=80.0,
                                    achieved_tbps=3.4, ceiling_tbps=4.25, ceiling_source="measured"),
        flags=["non-deterministic: two runs on the same inputs differ bitwise"],
        environment=Environment(gpu="NVIDIA H200", sm="sm_90", torch="2.11", confinement=["env-scrubbed"]),
        seconds=4.2, created_at="2026-11-30T10:00:00+00:00",
    )


def test_round_trip_keeps_every_field() -> None:
    v = full_verdict()
    back = Verdict.from_json(v.to_json())
    assert back == v
    assert back.performance is not None and back.performance.candidate is not None
    assert back.performance.candidate.iqr_ms == pytest.approx(0.03)
    assert back.schema_version == SCHEMA_VERSION
    data = json.loads(v.to_json())
    data["field_from_the_future"] = 1
    assert Verdict.from_dict(data) == v  # readers ignore unknown keys


def test_stored_verdicts_load() -> None:
    for path in sorted(DATA.glob("*.json")):
        v = Verdict.from_json(path.read_text(encoding="utf-8"))
        assert v.status in STATUSES
        assert render_text(v) and summary_line(v)


@pytest.mark.parametrize(("eager", "compile_", "correct", "tier"), [
    (2.0, 1.5, False, "incorrect"),
    (1.0, 0.5, True, "correct"),
    (1.05, 0.5, True, "correct"),
    (1.06, 0.5, True, "faster_than_eager"),
    (1.5, 1.06, True, "faster_than_compile"),
    (None, None, True, "correct"),
])
def test_tiers(eager: float | None, compile_: float | None, correct: bool, tier: str) -> None:
    assert tier_for(eager, compile_, correct) == tier


def test_render_ok() -> None:
    v = full_verdict()
    text = render_text(v)
    assert "verdict: OK" in text and "2.00x" in text and "1.60x" in text and "speed of light" in text
    assert "NVIDIA H200" in text and "softmax_kernel" in text and "42000" in text
    line = summary_line(v)
    assert line.startswith("correct (1 trials") and "2.00x vs eager" in line and "80% of speed of light" in line
    model = for_model(v)
    assert len(model.splitlines()) <= 40 and "tier faster_than_compile" in model


def test_a_figure_above_the_roofline_is_called_so_in_every_view() -> None:
    """111.73x the roofline's speed (diag_matmul's rewrite, which skips the work the problem writes out) is no
    share of speed of light: every view says it is faster than the roofline allows; 104% (timing noise at the
    roofline, within its 5% margin) is shown as a share as before."""
    from dataclasses import asdict

    from rich.console import Console

    from kernelpilot.agent.verdict_text import one_line, verdict_for_model
    from kernelpilot.tui.verdict_view import row_cells, verdict_text

    def shown(v: Verdict) -> str:
        console = Console(record=True, width=200, file=io.StringIO())
        console.print(verdict_text(v))
        return console.export_text()

    for pct, above in ((11173.0, True), (104.0, False), (80.0, False)):
        v = full_verdict()
        assert v.speed_of_light is not None
        v.speed_of_light.pct_of_ceiling = pct
        assert v.speed_of_light.above_roofline() is above
        said = "faster than the roofline allows"
        assert (said in summary_line(v)) is above and f"{pct:.0f}% of speed of light" in summary_line(v)
        assert (said in for_model(v)) is above
        assert (said in verdict_for_model(v)) is above
        assert (said in one_line(asdict(v))) is above
        assert (said in shown(v)) is above
        assert row_cells("c1", v)[6] == f"{pct:.0f}%" + ("!" if above else "")


def test_render_failures_name_the_cause() -> None:
    build = Verdict(status="build_error", build=BuildReport(ok=False, diagnostics=[
        Diagnostic("error", "identifier \"undefined_name\" is undefined", "kernel.cu", 4, tool="nvcc")]))
    assert summary_line(build) == 'build error at kernel.cu:4: identifier "undefined_name" is undefined'
    rejected = Verdict(status="rejected", findings=[
        Finding(rule="side-stream", message="kernel k ran on stream 13", evidence="k on stream 13"),
        Finding(rule="torch-compute-op", message="aten.mm ran", evidence="aten.mm")])
    assert summary_line(rejected) == "rejected [side-stream]: kernel k ran on stream 13 (+1 more)"
    assert "side-stream" in for_model(rejected)
    incorrect = Verdict(status="incorrect", correctness=Correctness(trials=[
        TrialResult(seed=7, distribution="scaled", order="reference_first", passed=False,
                    message="12 of 4096 output elements were never written (NaN poison left)")]))
    assert "never written" in summary_line(incorrect) and "seed 7" in summary_line(incorrect)
    crash = Verdict(status="runtime_error", error="the worker was killed by SIGSEGV\n--- worker log ---\nboom")
    assert summary_line(crash) == "runtime error: the worker was killed by SIGSEGV"
    assert "boom" in render_text(crash) and "boom" in for_model(crash)
    timeout = Verdict(status="timeout", error="no answer within 60 s; the worker was killed")
    assert summary_line(timeout) == "timeout: no answer within 60 s; the worker was killed"


def test_model_view_is_bounded() -> None:
    v = full_verdict()
    v.findings = [Finding(rule=f"r{i}", message="m") for i in range(30)]
    v.flags = [f"flag {i}" for i in range(30)]
    v.error = "\n".join(f"line {i}" for i in range(100))
    v.status = "runtime_error"
    assert len(for_model(v).splitlines()) <= 40
