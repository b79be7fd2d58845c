"""The machine's cache of baselines (machine_baselines.py): a real SQLite file, keyed on the problem's bytes,
the timing settings and this machine's identity; a corrupt or locked file is reported, never fatal."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.evaluation.baselines import machine_cache as mb
from kernelpilot.evaluation.baselines.service import current_identity, identity_mismatch
from kernelpilot.evaluation.baselines.values import Baselines, software_versions
from kernelpilot.evaluation.settings import EvalSettings

DATA = Path(__file__).parent / "data"
SOFTMAX = Path(__file__).parents[1] / "examples" / "softmax" / "problem.py"
IDENTITY: dict[str, Any] = {"gpu_uuid": "6f1d2c3b-aaaa-bbbb-cccc-000000000001", "driver": "580.95.05",
                            "torch": "2.14.1", "triton": "3.8.0", "cuda": "13.0",
                            "clocks": {"sm_max_mhz": 1980, "mem_max_mhz": 3201}}


def fixture_baselines(identity: dict[str, Any] = IDENTITY) -> Baselines:
    b = Baselines.from_dict(json.loads((DATA / "baselines" / "softmax_h200.json").read_text()))
    b.gpu_uuid, b.driver, b.torch = identity["gpu_uuid"], identity["driver"], identity["torch"] + "+cu130"
    b.triton, b.cuda, b.clocks = identity["triton"], identity["cuda"], dict(identity["clocks"])
    return b


@pytest.fixture()
def problem(tmp_path: Path) -> Path:
    path = tmp_path / "problem.py"
    path.write_bytes(SOFTMAX.read_bytes())
    return path


def test_a_hit_returns_the_stored_figures_with_their_date(tmp_path: Path, problem: Path) -> None:
    cache = tmp_path / "cache" / "baselines.sqlite"
    before = time.time()
    stored = mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    assert cache.is_file()
    found = mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache)
    assert found is not None and found.path == str(cache)
    assert found.baselines.eager is not None and stored.eager is not None and stored.compiled is not None
    assert found.baselines.eager.median_ms == stored.eager.median_ms == 0.957
    assert found.baselines.compiled is not None and found.baselines.compiled.median_ms == 1.124
    assert found.baselines.speed_of_light is not None and found.baselines.speed_of_light.floor_ms == 0.5053
    assert before <= found.measured_at <= time.time()
    assert found.date() == time.strftime("%Y-%m-%d", time.localtime(found.measured_at))
    # the date of a row measured earlier is its own
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE baselines SET created_at = ?", (1_700_000_000.0,))
    again = mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache)
    assert again is not None and again.date() == time.strftime("%Y-%m-%d", time.localtime(1_700_000_000.0))


@pytest.mark.parametrize("field", ["gpu_uuid", "driver", "torch", "triton", "cuda", "clocks"])
def test_another_identity_misses(tmp_path: Path, problem: Path, field: str) -> None:
    cache = tmp_path / "baselines.sqlite"
    mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    other = dict(IDENTITY, **{field: {"sm_max_mhz": 1755, "mem_max_mhz": 3201} if field == "clocks" else "9.9"})
    assert mb.lookup(problem, EvalSettings(), identity=other, path=cache) is None
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is not None


@pytest.mark.parametrize("change", [{"compile_mode": "max-autotune"}, {"rounds": 7}, {"seed": 1},
                                    {"cuda_graphs": True}, {"flush_bytes": 1 << 20}])
def test_other_timing_settings_miss(tmp_path: Path, problem: Path, change: dict[str, Any]) -> None:
    cache = tmp_path / "baselines.sqlite"
    mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    assert mb.lookup(problem, replace(EvalSettings(), **change), identity=IDENTITY, path=cache) is None
    # a setting that does not change what a baseline measures finds the row
    assert mb.lookup(problem, replace(EvalSettings(), test_timeout_s=999.0), identity=IDENTITY, path=cache)


def test_other_problem_bytes_miss(tmp_path: Path, problem: Path) -> None:
    cache = tmp_path / "baselines.sqlite"
    mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    problem.write_text(problem.read_text() + "\n# an edit\n")
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is None
    moved = tmp_path / "elsewhere.py"  # the same bytes anywhere: the same row
    moved.write_bytes(SOFTMAX.read_bytes())
    assert mb.lookup(moved, EvalSettings(), identity=IDENTITY, path=cache) is not None


def test_no_file_is_a_miss_and_creates_nothing(tmp_path: Path, problem: Path) -> None:
    cache = tmp_path / "none" / "baselines.sqlite"
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is None
    assert not cache.parent.exists()


def test_baselines_timed_on_another_setting_are_not_stored(tmp_path: Path, problem: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "baselines.sqlite"
    other_gpu = dict(IDENTITY, gpu_uuid="77777777-0000-0000-0000-000000000000")
    with caplog.at_level(logging.WARNING):
        mb.record(problem, EvalSettings(), None, fixture_baselines(other_gpu), identity=IDENTITY, path=cache)
    assert "measured on another setting (another GPU)" in caplog.text
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is None


def test_a_corrupt_file_is_reported_then_set_aside(tmp_path: Path, problem: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "baselines.sqlite"
    cache.write_bytes(b"this is not an SQLite file\n" * 200)
    with pytest.raises(mb.CacheUnavailable, match=r"baselines.sqlite could not be read \(file is not a database\)"):
        mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache)
    with caplog.at_level(logging.WARNING):
        mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    assert "is unreadable (file is not a database); moved to" in caplog.text
    aside = list(tmp_path.glob("baselines.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not an SQLite file")
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is not None


def test_a_locked_file_is_reported_quickly_and_never_raises_on_write(tmp_path: Path, problem: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "baselines.sqlite"
    mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    holder = sqlite3.connect(cache, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another session writing, or a stuck one
    try:
        t0 = time.monotonic()
        with pytest.raises(mb.CacheUnavailable, match="database is locked"):
            mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache)
        assert time.monotonic() - t0 < 2.0
        monkeypatch.setattr(mb, "WRITE_TIMEOUT_S", 0.1)
        with caplog.at_level(logging.WARNING):
            out = mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
        assert out.eager is not None and "not cached in" in caplog.text and "database is locked" in caplog.text
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is not None


def test_the_default_file_and_this_machines_identity(tmp_path: Path, problem: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``identity`` and ``path``: this machine as current_identity names it, the file the
    environment names (under platformdirs' cache dir otherwise)."""
    monkeypatch.delenv(mb.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert mb.cache_file() == tmp_path / "xdg" / "kernelpilot" / "baselines.sqlite"
    monkeypatch.setenv(mb.ENV, str(tmp_path / "mine.sqlite"))
    now = current_identity(None)
    mb.record(problem, EvalSettings(), None, fixture_baselines(now))
    assert (tmp_path / "mine.sqlite").is_file()
    assert mb.lookup(problem, EvalSettings()) is not None


def test_triton_and_cuda_versions_name_the_machine(tmp_path: Path) -> None:
    import torch

    triton, cuda = software_versions()
    assert triton == version("triton") and cuda == (torch.version.cuda or "")
    now = current_identity(None)
    assert (now["triton"], now["cuda"]) == (triton, cuda)
    stored = dict(now, triton="3.1.0", cuda="12.4")
    assert identity_mismatch(stored,
                             dict(now, triton="3.8.0", cuda="13.0")) == "Triton 3.1.0 -> 3.8.0; CUDA 12.4 -> 13.0"
    assert identity_mismatch(dict(now, triton="", cuda=""), now) == ""  # rows stored before these were recorded


def test_a_lookup_imports_no_torch_and_takes_well_under_a_second(tmp_path: Path, problem: Path) -> None:
    cache = tmp_path / "baselines.sqlite"
    code = f"""
import sys, time
from pathlib import Path
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.baselines import machine_cache as mb
from kernelpilot.evaluation.baselines.identity import current_identity
from kernelpilot.evaluation.baselines.values import Baselines
b = Baselines(eager=None)
t0 = time.monotonic()
found = mb.lookup(Path({str(problem)!r}), EvalSettings(), path=Path({str(cache)!r}))
took = time.monotonic() - t0
print(found is not None, 'torch' in sys.modules or 'kernelpilot.evaluation.evaluator' in sys.modules, round(took, 3))
"""
    now = current_identity(None)
    mb.record(problem, EvalSettings(), None, fixture_baselines(now), path=cache)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    hit, torch_imported, took = out.stdout.split()
    assert (hit, torch_imported) == ("True", "False"), out.stderr
    assert float(took) < 1.0


def test_a_lookup_started_early_answers_through_its_future(tmp_path: Path, problem: Path) -> None:
    """``lookup_soon`` (the launcher's, before the screen loads): the same answer as ``lookup``, found on a thread
    of its own; what the lookup or the settings raise comes out of the future, never out of the thread."""
    cache = tmp_path / "baselines.sqlite"
    mb.record(problem, EvalSettings(), None, fixture_baselines(current_identity(None)), path=cache)
    threads: list[str] = []

    def settings() -> EvalSettings:
        threads.append(threading.current_thread().name)
        return EvalSettings()

    found = mb.lookup_soon(problem, settings, path=cache).result(timeout=30)
    assert found is not None and found.baselines.eager is not None and found.baselines.eager.median_ms == 0.957
    assert threads == ["kernelpilot-cached-baselines"]
    assert mb.lookup_soon(problem, EvalSettings, path=tmp_path / "none.sqlite").result(timeout=30) is None
    cache.write_bytes(b"this is not an SQLite file\n" * 200)
    with pytest.raises(mb.CacheUnavailable, match="could not be read"):
        mb.lookup_soon(problem, EvalSettings, path=cache).result(timeout=30)

    def broken() -> EvalSettings:
        raise ValueError("kernelpilot.toml: trials must be positive")

    with pytest.raises(ValueError, match="trials must be positive"):
        mb.lookup_soon(problem, broken, path=cache).result(timeout=30)


def test_each_write_keeps_only_the_newest_rows_of_the_last_days(tmp_path: Path, problem: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "baselines.sqlite"
    table = mb.BaselineTable(cache, wal=False)
    now = time.time()
    for i in range(6):  # rows of earlier sessions: two too old, four recent
        table.put(f"old-{i}", f"p{i}.py", {"eager": None}, at=now - (100 if i < 2 else 10 - i) * 86400.0)
    table.close()
    monkeypatch.setattr(mb, "KEEP_ROWS", 3)
    mb.record(problem, EvalSettings(), None, fixture_baselines(), identity=IDENTITY, path=cache)
    with sqlite3.connect(cache) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM baselines ORDER BY created_at")]
    assert keys[:2] == ["old-4", "old-5"] and len(keys) == 3  # the 100-day-old rows and the oldest recent one went
    assert mb.lookup(problem, EvalSettings(), identity=IDENTITY, path=cache) is not None  # the new row stays
