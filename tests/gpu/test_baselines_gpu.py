"""The baselines op on a real GPU: eager and torch.compile timed by the engine's timing, with the floor
at the measured ceilings (what the TUI's problem card shows before any candidate exists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.evaluation import EvalSettings, Evaluator

pytestmark = pytest.mark.gpu

PROBLEM = Path(__file__).parents[1] / "data" / "problems" / "softmax_bf16.py"


def test_baselines_on_the_gpu(tmp_path: Path) -> None:
    settings = EvalSettings(rounds=2, samples_per_round=10)
    with Evaluator(settings, workdir=tmp_path / "work") as ev:
        b = ev.baselines(PROBLEM)
        assert b.eager is not None and b.eager.median_ms > 0 and b.eager.samples == 10
        assert b.compiled is not None and b.compiled.median_ms > 0, b.notes
        sol = b.speed_of_light
        assert sol is not None and sol.floor_ms and sol.bound in ("memory", "compute")
        assert b.ceilings["copy_tbps"] > 0.5 and b.gpu
        assert 0 < (b.eager_pct_of_ceiling or 0) <= 105  # eager cannot beat the roofline by much
        again = ev.baselines(PROBLEM)  # the warm worker keeps the compiled baseline
        assert again.eager is not None and again.seconds < b.seconds
