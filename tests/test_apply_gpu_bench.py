"""benchmarks/apply_gpu.py's bookkeeping for issue 52's device calls: a compile phase with one mode keeps its own
files, the later phases take the faster baseline any compile phase measured, and a command cut short leaves what it
printed in its log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_one_mode_keeps_its_own_files_and_the_faster_baseline_wins(tmp_path: Path) -> None:
    from apply_gpu import compile_name, faster_compile

    assert compile_name(None) == "apply_compile"
    assert compile_name("default,max-autotune-no-cudagraphs") == "apply_compile"
    assert compile_name("max-autotune-no-cudagraphs") == "apply_compile-max-autotune-no-cudagraphs"
    assert faster_compile(tmp_path) == (None, None)  # no compile phase yet
    (tmp_path / "apply_compile-default.json").write_text(json.dumps(
        {"compile_baselines": {"default": {"step_ms": 284.0, "spread_ms": 5.3, "error": ""}}}))
    (tmp_path / "apply_compile-max-autotune-no-cudagraphs.json").write_text(json.dumps(
        {"compile_baselines": {"max-autotune-no-cudagraphs": {"step_ms": 279.5, "spread_ms": 4.0, "error": ""}}}))
    (tmp_path / "apply_compile_opaque.json").write_text(json.dumps(
        {"compile_baselines": {"default": {"step_ms": None, "spread_ms": None, "error": "failed"}}}))
    assert faster_compile(tmp_path) == ("max-autotune-no-cudagraphs", "apply_compile-max-autotune-no-cudagraphs.json")


def test_a_command_cut_short_leaves_what_it_printed(tmp_path: Path) -> None:
    from apply_gpu import sh

    code = "import sys, time; print('measured 3 steps', flush=True); print('warn', file=sys.stderr); time.sleep(30)"
    rc, text = sh([sys.executable, "-c", code], tmp_path, tmp_path / "cut.txt", timeout=3)
    log = (tmp_path / "cut.txt").read_text()
    assert rc == 124 and "measured 3 steps" in text and "measured 3 steps" in log
    assert "[stderr]\nwarn" in log and "timed out after 3 s" in log
    assert not (tmp_path / "cut.txt.stderr").exists()
