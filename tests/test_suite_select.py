"""Choosing the jobs of one `kernelpilot suite` call (--levels, --problems, --limit), on a new run and with
--resume: the stored plan never changes, only the chosen pending jobs run, and the report counts the jobs
not run yet apart from the failures. Real `kernelpilot suite` runs on the CPU and real SQLite files."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.cli import main
from kernelpilot.suite.discovery import (ProblemRef, SuiteInputError, discover_jobs, discover_problems, problem_matches,
                                         select_jobs)
from kernelpilot.suite.store import Store

DATA = Path(__file__).parent / "data" / "suite"
PROBLEM = DATA / "problems" / "1_scaled_add.py"
LEVELS = {1: ("1_A", "2_B", "23_Softmax"), 2: ("1_C", "5_D")}
# the plan's order: problem files sorted by name in each level ("23_Softmax" sorts before "2_B")
PLAN = ["level1/1_A#0", "level1/23_Softmax#0", "level1/2_B#0", "level2/1_C#0", "level2/5_D#0"]


def _checkout(tmp: Path) -> tuple[Path, Path]:
    """A KernelBench checkout (KernelBench/level1, level2) and an empty solutions folder: every job is
    `missing`, so a run stores its verdicts without building anything."""
    kb = tmp / "kb"
    for level, names in LEVELS.items():
        folder = kb / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for name in names:
            shutil.copy(PROBLEM, folder / f"{name}.py")
    (kb / "COMMIT").write_text("0123456789abcdef0123456789abcdef01234567\n")
    solutions = tmp / "solutions"
    solutions.mkdir()
    return kb, solutions


def _suite(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    code = main(["suite", *argv, "--device", "cpu", "--jsonl"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    return code, events


def _db(run: Path) -> tuple[list[tuple[Any, ...]], list[str], dict[str, str]]:
    with sqlite3.connect(run / "results.sqlite") as con:
        plan = con.execute("SELECT * FROM jobs ORDER BY rowid").fetchall()
        verdicts = [r[0] for r in con.execute("SELECT job_key FROM verdicts ORDER BY id")]
        meta = dict(con.execute("SELECT key, value FROM meta"))
    return plan, verdicts, meta


def test_a_new_run_plans_every_problem_and_runs_only_the_chosen_jobs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    code, events = _suite(capsys, str(kb), "--solutions", str(solutions), "--out", str(run), "--mode", "test",
                          "--levels", "1", "--limit", "2")
    assert code == 0
    plan, verdicts, meta = _db(run)
    assert [row[0] for row in plan] == PLAN  # --levels and --limit did not narrow the plan
    assert verdicts == PLAN[:2]  # the first two level-1 jobs, in plan order
    assert json.loads(meta["levels"]) is None
    started = events[0]
    assert (started["event"], started["total"], started["already_done"], started["planned"],
            started["left_for_later"]) == (
        "suite_started", 2, 0, 5, 3)
    assert [e["job"] for e in events if e["event"] == "verdict"] == PLAN[:2]
    report = json.loads((run / "report.json").read_text())
    assert (report["jobs"], report["verdicts"], report["not_run_yet"], report["complete"]) == (5, 2, 3, False)
    assert report["not_run_yet_jobs"] == PLAN[2:]
    views = report["views"]["sample0"]
    # not run yet: counted apart, yet a failure in every rate over all problems
    assert (views["level1"]["problems"], views["level1"]["failed"], views["level1"]["not_run_yet"]) == (3, 2, 1)
    assert (views["level2"]["problems"], views["level2"]["failed"], views["level2"]["not_run_yet"]) == (2, 0, 2)
    overall = views["overall"]
    assert (overall["problems"], overall["pass_rate"], overall["not_run_yet"]) == (5, 0.0, 3)
    assert overall["statuses"] == {"missing": 2}  # the statuses are the verdicts'; not run yet is apart
    assert [p["status"] for p in report["per_problem"]] == ["missing", "missing", "not_run_yet", "not_run_yet",
                                                            "not_run_yet"]
    text = (run / "report.md").read_text()
    assert "**Incomplete run:** 3 of 5 planned jobs not run yet" in text and f"--resume {run}" in text
    assert "| level2 | 2 | 0.0% |" in text and text.count("| overall | 5 |") == 1
    assert "Statuses: missing 2; not run yet 3" in text


def test_resume_keeps_the_plan_and_runs_only_the_chosen_pending_jobs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    assert _suite(capsys, str(kb), "--solutions", str(solutions), "--out", str(run), "--mode", "test", "--limit",
                  "1")[0] == 0
    plan0, verdicts0, meta0 = _db(run)
    assert verdicts0 == PLAN[:1]
    # the folders change after the plan: a new problem and a solution for a planned one; the plan stays
    shutil.copy(PROBLEM, kb / "KernelBench" / "level2" / "9_New.py")
    shutil.copy(DATA / "solutions" / "1_scaled_add.py", solutions / "5_D.py")
    code, events = _suite(capsys, "--resume", str(run), "--problems", "level2/5,1/23,level1/1_A")
    assert code == 0
    plan1, verdicts1, meta1 = _db(run)
    assert plan1 == plan0 and meta1 == meta0
    # level1/1_A had its verdict already; 23_Softmax and level2/5_D ran (5_D as planned: no candidate)
    assert verdicts1 == [PLAN[0], PLAN[1], PLAN[4]]
    assert (events[0]["total"], events[0]["already_done"], events[0]["left_for_later"]) == (3, 1, 2)
    with sqlite3.connect(run / "results.sqlite") as con:
        assert con.execute("SELECT candidate, status FROM verdicts WHERE job_key = ?", (PLAN[4],)).fetchone() == \
            (None, "missing")
    # --levels on a resume chooses pending jobs too: level2/1_C only, not the pending level-1 job
    code, events = _suite(capsys, "--resume", str(run), "--levels", "2")
    assert code == 0 and [e["job"] for e in events if e["event"] == "verdict"] == [PLAN[3]]
    assert _db(run)[0] == plan0
    report = json.loads((run / "report.json").read_text())
    assert (report["not_run_yet"], report["not_run_yet_jobs"], report["complete"]) == (1, [PLAN[2]], False)
    # a plain resume runs what is left; the run is complete, and nothing chosen a second time runs again
    assert _suite(capsys, "--resume", str(run))[0] == 0
    _, events = _suite(capsys, "--resume", str(run), "--problems", "level1/*")
    assert not [e for e in events if e["event"] == "verdict"] and events[0]["already_done"] == 3
    plan2, verdicts2, _ = _db(run)
    assert plan2 == plan0 and sorted(verdicts2) == sorted(PLAN)
    report = json.loads((run / "report.json").read_text())
    assert report["complete"] and report["not_run_yet"] == 0
    assert "Incomplete run" not in (run / "report.md").read_text()
    with sqlite3.connect(run / "results.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 5


def test_add_new_plans_the_files_added_since_and_keeps_every_verdict(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """--resume --add-new: samples written into the solutions folder after the run started are planned (a
    problem that had none loses its `missing` verdict to its new samples); judged jobs keep their verdicts,
    and problems outside the run's plan stay out."""
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    assert _suite(capsys, str(kb), "--solutions", str(solutions), "--out", str(run), "--mode", "test")[0] == 0
    assert sorted(_db(run)[1]) == sorted(PLAN)  # every job `missing`
    # two samples of level1/1_A and one of a problem the run never planned arrive later
    for sample in (0, 1):
        shutil.copy(DATA / "solutions" / "1_scaled_add.py", solutions / f"level_1_problem_1_sample_{sample}_kernel.py")
    shutil.copy(DATA / "solutions" / "1_scaled_add.py", solutions / "level_3_problem_1_sample_0_kernel.py")
    # a plain resume keeps its plan; --add-new with another problem chosen plans the files and runs nothing
    assert _suite(capsys, "--resume", str(run))[0] == 0 and len(_db(run)[0]) == 5
    capsys.readouterr()
    code, events = _suite(capsys, "--resume", str(run), "--add-new", "--problems", "level2/*")
    assert code == 0 and not [e for e in events if e["event"] == "verdict"]
    plan, verdicts, _ = _db(run)
    assert [r[0] for r in plan] == [*PLAN, "level1/1_A#1"]
    assert [r[6] for r in plan if r[0].startswith("level1/1_A")] == [
        str((solutions / f"level_1_problem_1_sample_{s}_kernel.py").resolve()) for s in (0, 1)]
    assert sorted(verdicts) == sorted(PLAN[1:])  # 1_A#0's `missing` verdict is gone, the others stay
    assert main(["suite", "--resume", str(run), "--add-new", "--problems", "level2/*", "--device", "cpu",
                 "--jsonl"]) == 0
    assert "--add-new: 0 new file(s)" in capsys.readouterr().err and _db(run)[0] == plan
    # misuse says what to do
    assert main(["suite", str(kb), "--solutions", str(solutions), "--out", str(tmp_path / "other"), "--add-new"]) == 2
    assert "use it with --resume RUN" in capsys.readouterr().err


def test_resuming_a_run_planned_with_levels_keeps_its_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run made before --levels only chose jobs: its plan holds level 1 only (meta levels [1]). A resume runs
    that plan, never adds level 2, and --levels 2 is refused (the plan has no level 2)."""
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    jobs = discover_jobs(discover_problems([kb], [1]), solutions)
    store = Store(run)
    store.set_meta(problems=[str(kb)], solutions=str(solutions), mode="test", levels=[1], model=None, replay=None,
                   rules="kernelpilot", overrides={"rules": "kernelpilot", "device": "cpu", "confine": False},
                   source=str(kb))
    store.plan(jobs)
    store.close()
    plan0 = _db(run)[0]
    assert main(["suite", "--resume", str(run), "--levels", "2"]) == 2
    assert "no problem in level 2 (its levels: 1)" in capsys.readouterr().err
    code, events = _suite(capsys, "--resume", str(run))
    assert code == 0 and sorted(e["job"] for e in events if e["event"] == "verdict") == sorted(PLAN[:3])
    assert _db(run)[0] == plan0
    assert json.loads((run / "report.json").read_text())["complete"]


def test_bad_choices_say_what_to_do_and_leave_nothing_behind(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    kb, solutions = _checkout(tmp_path)
    run = tmp_path / "run"
    base = ["suite", str(kb), "--solutions", str(solutions), "--out", str(run), "--device", "cpu", "--mode", "test"]
    assert main([*base, "--problems", "level1/99"]) == 2
    assert "'level1/99' matches no problem of the run (5 problems: level1/1_A" in capsys.readouterr().err
    assert main([*base, "--levels", "3"]) == 2
    assert "no problem in level 3 (its levels: 1, 2)" in capsys.readouterr().err
    assert main([*base, "--levels", "2", "--problems", "level1/*"]) == 2
    assert "loosen one of them" in capsys.readouterr().err
    assert not run.exists()  # a refused new run makes no run folder
    assert main([*base, "--problems", ","]) == 2
    assert "names no problem" in capsys.readouterr().err
    assert main([*base, "--limit", "1"]) == 0
    capsys.readouterr()
    assert main(["suite", "--resume", str(run), str(kb)]) == 2
    assert "takes no PROBLEMS" in capsys.readouterr().err
    assert main(["suite", "--resume", str(run), "--problems", "9/9"]) == 2
    assert "matches no problem of the run" in capsys.readouterr().err
    assert main(["suite", "--resume", str(run), "--samples", "7"]) == 2
    assert "--samples 7: the run has no sample 7" in capsys.readouterr().err
    assert main(["suite", "--resume", str(run), "--samples", "first"]) == 2
    assert "is not a list of sample indices" in capsys.readouterr().err
    assert _db(run)[1] == PLAN[:1]  # the refused calls ran nothing


def test_problem_items_and_selection() -> None:
    softmax = ProblemRef("level1/23_Softmax", Path("/kb/level1/23_Softmax.py"), 1, 23)
    plain = ProblemRef("1_scaled_add", Path("/p/1_scaled_add.py"), None, 1)
    for item in ("level1/23_Softmax", "23_Softmax", "level1/23", "1/23", "23", "level1/2*", "*Softmax", "level?/*"):
        assert problem_matches(item, softmax), item
    for item in ("level2/23", "2/23", "24", "level1/1*", "Softmax", "level1/23_softmax"):
        assert not problem_matches(item, softmax), item
    assert problem_matches("1", plain) and problem_matches("1_*", plain) and not problem_matches("1/1", plain)
    from kernelpilot.suite.discovery import Job

    jobs = [Job(softmax, None, 0), Job(softmax, None, 1), Job(plain, None, 0)]
    sel = select_jobs(jobs, {"level1/23_Softmax#0"}, problems=["1/23"])
    assert [j.key for j in sel.todo] == ["level1/23_Softmax#1"] and (sel.already, sel.pending, sel.left) == (1, 2, 1)
    sel = select_jobs(jobs, set(), limit=2)
    assert [j.key for j in sel.todo] == ["level1/23_Softmax#0", "level1/23_Softmax#1"] and sel.left == 1
    # --samples: sample 0 of every problem (what KernelBench scores), the other samples left for a later call
    sel = select_jobs(jobs, set(), samples=[0])
    assert [j.key for j in sel.todo] == ["level1/23_Softmax#0", "1_scaled_add#0"] and sel.left == 1
    sel = select_jobs(jobs, set(), problems=["1/23"], samples=[1])
    assert [j.key for j in sel.todo] == ["level1/23_Softmax#1"]
    with pytest.raises(SuiteInputError, match="no sample 3 .its samples: 0, 1"):
        select_jobs(jobs, set(), samples=[3])
    with pytest.raises(SuiteInputError, match="of --samples at once"):
        select_jobs(jobs, set(), problems=["1_scaled_add"], samples=[1])


def test_a_level_folder_keeps_its_level(tmp_path: Path) -> None:
    kb, _ = _checkout(tmp_path)
    refs = discover_problems([kb / "KernelBench" / "level2"])
    assert [(r.key, r.level, r.number) for r in refs] == [("level2/1_C", 2, 1), ("level2/5_D", 2, 5)]


@pytest.mark.slow
def test_only_the_chosen_candidate_is_evaluated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two problems with real candidates: --problems 2 builds the second one only; the first stays not run yet
    (never built) until a later call chooses it."""
    problems = tmp_path / "problems"
    shutil.copytree(DATA / "problems", problems)
    run = tmp_path / "run"
    code, events = _suite(capsys, str(problems), "--solutions", str(DATA / "solutions"), "--out", str(run),
                          "--mode", "build", "--rules", "kernelbench", "--build-workers", "1", "--problems", "2")
    assert code == 0
    assert [(e["job"], e["status"]) for e in events if e["event"] == "verdict"] == [("2_tiny_softmax#0", "ok")]
    plan, verdicts, _ = _db(run)
    assert [r[0] for r in plan] == ["1_scaled_add#0", "2_tiny_softmax#0", "3_no_solution#0"]
    assert verdicts == ["2_tiny_softmax#0"]
    with sqlite3.connect(run / "results.sqlite") as con:
        stored = json.loads(con.execute("SELECT verdict FROM verdicts").fetchone()[0])
    assert stored["status"] == "ok" and stored["build"]["ok"]
    report = json.loads((run / "report.json").read_text())
    overall = report["views"]["sample0"]["overall"]
    assert (overall["problems"], overall["passed"], overall["not_run_yet"], overall["pass_rate"]) == \
        (3, 1, 2, pytest.approx(1 / 3))
    # the no-solution problem next: no build needed, the scaled-add candidate is still never built
    code, events = _suite(capsys, "--resume", str(run), "--problems", "3_no_solution")
    assert code == 0
    assert [(e["job"], e["status"]) for e in events if e["event"] == "verdict"] == [("3_no_solution#0", "missing")]
    assert _db(run)[:2] == (plan, ["2_tiny_softmax#0", "3_no_solution#0"])
