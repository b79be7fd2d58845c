"""One code version per run (issue 51 item 4): every verdict records the version of kernelpilot's code that judged
it; --resume under another version refuses unless --allow-mixed-versions, and the report lists the versions a run
spans. Real `kernelpilot suite` runs on the CPU (missing candidates: nothing is built) and real SQLite files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from kernelpilot.cli import main
from kernelpilot.code_version import running_version
from test_suite_select import PLAN, _checkout, _suite


def _versions(run: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(run / "results.sqlite") as con:
        return con.execute("SELECT job_key, code_version FROM verdicts ORDER BY id").fetchall()


def test_a_resume_under_another_version_refuses_unless_mixing_is_asked_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    now = running_version().key
    assert _suite(capsys, str(kb), "--solutions", str(solutions), "--out", str(run), "--mode", "test",
                  "--limit", "2")[0] == 0
    assert _versions(run) == [(PLAN[0], now), (PLAN[1], now)]
    assert _suite(capsys, "--resume", str(run), "--limit", "1")[0] == 0  # the same version: goes on
    with sqlite3.connect(run / "results.sqlite") as con:  # as if an older version of the code had judged one
        con.execute("UPDATE verdicts SET code_version = ? WHERE job_key = ?", ("0" * 40, PLAN[0]))
    code = main(["suite", "--resume", str(run), "--device", "cpu", "--jsonl"])
    err = capsys.readouterr().err
    assert code != 0 and "another version of kernelpilot's code" in err and "--allow-mixed-versions" in err
    assert len(_versions(run)) == 3  # nothing was judged
    assert _suite(capsys, "--resume", str(run), "--allow-mixed-versions")[0] == 0
    assert len(_versions(run)) == len(PLAN)
    report = json.loads((run / "report.json").read_text())
    assert report["commits"] == {"0" * 40: 1, now: len(PLAN) - 1}
    assert "more than one version of kernelpilot's code" in (run / "report.md").read_text()


def test_verdicts_of_a_run_made_before_versions_were_recorded_do_not_block_a_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    assert _suite(capsys, str(kb), "--solutions", str(solutions), "--out", str(run), "--mode", "test",
                  "--limit", "1")[0] == 0
    with sqlite3.connect(run / "results.sqlite") as con:
        con.execute("UPDATE verdicts SET code_version = NULL")
    assert _suite(capsys, "--resume", str(run))[0] == 0
    assert json.loads((run / "report.json").read_text())["commits"]["unrecorded"] == 1
