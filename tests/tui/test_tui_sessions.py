"""Sessions after the app: quitting says which session it was, how to resume it and how to remove it;
a manual session resumes from its worktree; `kernelpilot sessions` lists and removes sessions (only their
worktree, branch and record). Real git repositories, the real CLI in a subprocess, the app under Pilot."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

from agent_support import FixtureEvaluator, candidate_files, git, make_project, open_project
from kernelpilot.agent.events import SessionStarted
from kernelpilot.landing import approve
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.pairing import WorkspaceEditEvaluator
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, table_rows, wait_for

D = "kernels/vector_scale"


def kp(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELPILOT_MODEL"}
    return subprocess.run([sys.executable, "-m", "kernelpilot", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


async def test_quitting_says_the_session_how_to_resume_it_and_how_to_remove_it(tmp_path: Path) -> None:
    p = open_project(tmp_path)
    ws = p.workspace
    fixture = FixtureEvaluator(["build_error.json"])
    started = SessionStarted(session_id=ws.session_id, problem=p.problem.name, model="manual",
                             worktree=str(ws.path), branch=ws.branch)
    watch_dir = ws.path / D
    session = EventStreamSession([started], on_approve=partial(approve, ws), on_reject=ws.reject)
    startup = Startup(session=session, model="",
                      session_id=ws.session_id, worktree=ws.path, watch_dir=watch_dir, workspace=ws, problem=p.problem,
                      gpu=False,
                      edit_evaluator=WorkspaceEditEvaluator(ws, watch_dir, lambda d: fixture.evaluate(p.problem, d)))
    app = KernelpilotApp(startup, gpu_source=GPU, watch_interval=0.1)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.watcher is not None, what="the watcher")
        watch_dir.mkdir(parents=True, exist_ok=True)
        for name, text in candidate_files().items():
            (watch_dir / name).write_text(text)
        await wait_for(pilot, lambda: "e1" in table_rows(app), timeout=20, what="the save evaluated as e1")
        await pilot.press(*"/quit", "enter")
        await wait_for(pilot, lambda: not app.is_running, what="exit")
    said = startup.farewell()  # what launch() prints once the app has ended
    sid = ws.session_id
    assert said.startswith(f"kernelpilot session {sid}: worktree {ws.path}, branch kernelpilot/{sid}; "
                           "1 candidate, 1 not approved.")
    assert f"resume it:  kernelpilot {p.problem.path} --resume {sid}" in said
    assert f"remove it:  kernelpilot sessions rm {sid}" in said and "with it e1" in said


def test_a_manual_session_resumes_from_its_worktree(tmp_path: Path, monkeypatch: object) -> None:
    from kernelpilot.config import load_config
    from kernelpilot.tui.launch import build_startup

    p = open_project(tmp_path)
    ws = p.workspace
    ws.write_file(f"{D}/kernel.cu", "// my first try\n")
    ws.checkpoint("e1", "engineer edit: kernel.cu", {"status": "build_error"})
    config = load_config(p.root, overrides={"problem": str(p.problem.path)}, env={})
    args = argparse.Namespace(path=str(p.root), model=None, replay=None, resume=ws.session_id, config=config,
                              problem=p.problem.path)
    startup = build_startup(args, None)  # no transcript: a manual session is its worktree and branch
    try:
        assert startup.manual and startup.session_id == ws.session_id and startup.worktree == ws.path
        assert (startup.watch_dir / "kernel.cu").read_text() == "// my first try\n"
        assert startup.edit_evaluator._next_id() == "e2"  # type: ignore[union-attr]  # its own saves go on
    finally:
        if startup.edit_evaluator is not None:
            startup.edit_evaluator.close()
        if startup.engine is not None:
            startup.engine.close()


def test_sessions_lists_and_removes_only_the_sessions_worktree_and_branch(tmp_path: Path) -> None:
    from kernelpilot.workspace import Workspace

    problem = make_project(tmp_path / "proj")
    root = problem.parent
    kept = Workspace.open(root, "20261201-100000-aaaaaa", candidate_dir=D, problem=problem)
    kept.write_file(f"{D}/kernel.cu", "// approved\n")
    kept.checkpoint("c1", "ok", {"status": "ok"})
    approved = approve(kept, "c1")
    gone = Workspace.open(root, "20261202-100000-bbbbbb", candidate_dir=D, problem=problem)
    gone.write_file(f"{D}/kernel.cu", "// broken\n")
    gone.checkpoint("e1", "engineer edit", {"status": "build_error"})
    gone.write_file(f"{D}/kernel.cu", "// wrong\n")
    gone.checkpoint("e2", "engineer edit", {"status": "incorrect"})

    listed = kp("sessions", cwd=root)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert rows[0].split() == ["id", "problem", "created", "branch", "candidates", "unapproved"]
    assert rows[1].split() == ["20261201-100000-aaaaaa", "vector_scale.py", *rows[1].split()[2:4],
                               "kernelpilot/20261201-100000-aaaaaa", "1", "0"]
    assert rows[2].split()[0] == "20261202-100000-bbbbbb" and rows[2].split()[-2:] == ["2", "2"]

    asked = kp("sessions", "rm", "20261202-100000-bbbbbb", cwd=root, stdin="n\n")
    assert asked.returncode == 1 and "nothing was removed" in asked.stdout
    assert "unapproved candidates removed with it: e1 (build_error), e2 (incorrect)" in asked.stdout
    assert "Remove this session? [y/N]" in asked.stdout and gone.worktree_root.is_dir()

    head = git(root, "rev-parse", "HEAD").strip()
    removed = kp("sessions", "rm", "20261202-100000-bbbbbb", "--yes", cwd=root)
    assert removed.returncode == 0, removed.stderr
    assert f"removed session 20261202-100000-bbbbbb: worktree {gone.worktree_root}, branch " in removed.stdout
    assert not gone.worktree_root.exists() and not git(root, "branch", "--list", "kernelpilot/20261202-100000-bbbbbb")
    assert kept.worktree_root.is_dir() and git(root, "branch", "--list", "kernelpilot/20261201-100000-aaaaaa")
    assert git(root, "rev-parse", "HEAD").strip() == head == approved  # the engineer's branch is untouched
    assert "20261202-100000-bbbbbb" not in kp("sessions", cwd=root).stdout

    unknown = kp("sessions", "rm", "nope", "--yes", cwd=root)
    assert unknown.returncode == 2 and "no session 'nope'" in unknown.stderr
    assert "20261201-100000-aaaaaa" in unknown.stderr
    shutil.rmtree(kept.worktree_root)  # a worktree folder deleted by hand: its branch and record still go
    everything = kp("sessions", "rm", "--all", "--yes", cwd=root)
    assert everything.returncode == 0 and "no unapproved candidates" in everything.stdout
    assert ("removed session 20261201-100000-aaaaaa: branch kernelpilot/20261201-100000-aaaaaa, its record"
            in everything.stdout)
    assert not kept.worktree_root.exists() and not git(root, "branch", "--list", "kernelpilot/*")
    assert git(root, "rev-parse", "HEAD").strip() == approved
    assert (root / D / "kernel.cu").read_text() == "// approved\n"
    assert kp("sessions", cwd=root).stdout.startswith("no kernelpilot sessions in ")
