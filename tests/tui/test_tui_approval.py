"""Nothing approved by mistake, in the UI: manual mode on a real git project and worktree, the engineer's
saves evaluated by the fixture evaluator (the one accepted double: CI has no GPU), reviewed and approved
with the keys. A save that does not build is refused with the reason and never lands; an incorrect or a
build-only one lands only after a second confirmation that names its status, and the commit says it."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from agent_support import VERDICTS, FixtureEvaluator, candidate_files, git, open_project
from kernelpilot.agent.events import SessionStarted
from kernelpilot.landing import approve
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.pairing import WorkspaceEditEvaluator
from kernelpilot.tui.review import ConfirmModal, ReviewScreen
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, table_rows, wait_for

D = "kernels/vector_scale"


def manual_app(tmp_path: Path, verdict_file: str, mode: str = "benchmark"
               ) -> tuple[KernelpilotApp, Any, EventStreamSession, Path]:
    """Manual mode as ``build_startup`` makes it: with no GPU, ``mode`` is build (build-only verdicts)."""
    p = open_project(tmp_path)
    fixture = FixtureEvaluator([verdict_file], build=verdict_file)
    ws = p.workspace
    started = SessionStarted(session_id=ws.session_id, problem=p.problem.name, model="manual",
                             worktree=str(ws.path), branch=ws.branch)
    session = EventStreamSession([started], on_approve=partial(approve, ws), on_reject=ws.reject)
    watch_dir = ws.path / D
    edit = WorkspaceEditEvaluator(ws, watch_dir, lambda d: fixture.evaluate(p.problem, d, mode=mode))
    startup = Startup(session=session, model="", worktree=ws.path, watch_dir=watch_dir, edit_evaluator=edit,
                      workspace=ws)
    return KernelpilotApp(startup, gpu_source=GPU, watch_interval=0.1), p, session, watch_dir


def save_candidate(watch_dir: Path, extra: str = "") -> None:
    watch_dir.mkdir(parents=True, exist_ok=True)
    for name, text in candidate_files().items():
        (watch_dir / name).write_text(text + (extra if name.endswith(".cu") else ""))


def title(app: KernelpilotApp) -> str:
    return str(app.screen.query_one("#review-title").content)


async def test_a_save_that_does_not_build_is_refused_with_the_reason(tmp_path: Path) -> None:
    app, p, session, watch_dir = manual_app(tmp_path, "build_error.json")
    head = git(p.root, "rev-parse", "HEAD").strip()
    async with app.run_test(size=(140, 40)) as pilot:
        save_candidate(watch_dir, "\nthis line does not compile\n")
        await wait_for(pilot, lambda: "e1" in table_rows(app), timeout=20, what="the save evaluated as e1")
        assert table_rows(app)["e1"][1] == "build err"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("a")
        await wait_for(pilot, lambda: "NOT APPROVED" in title(app), what="the refusal")
        assert "its verdict is build_error (build failed: 1 error in kernel.cu), and it does not build" in title(app)
        assert not isinstance(app.screen, ConfirmModal)  # refused outright: no question to say yes to
        await pilot.press("a")  # again: still refused
        await pilot.pause(0.3)
        assert app.panel.records["e1"].state == "" and not session.approved
    assert git(p.root, "rev-parse", "HEAD").strip() == head
    assert not (p.root / D).exists()  # the broken line never reached the engineer's branch


@pytest.mark.parametrize(("verdict_file", "mode", "status"),
                         [("incorrect", "benchmark", "incorrect"), ("build_only.json", "build", "built")])
async def test_incorrect_or_build_only_needs_a_second_confirmation_naming_it(
        tmp_path: Path, verdict_file: str, mode: str, status: str) -> None:
    if verdict_file == "incorrect":
        data = json.loads((VERDICTS / "vector_scale_ok.json").read_text())
        data.update(status="incorrect", summary="incorrect: 812 of 8192 mismatched", performance=None)
        verdict_file = str(tmp_path / "incorrect.json")
        Path(verdict_file).write_text(json.dumps(data))
    app, p, session, watch_dir = manual_app(tmp_path, verdict_file, mode)
    head = git(p.root, "rev-parse", "HEAD").strip()
    async with app.run_test(size=(140, 40)) as pilot:
        save_candidate(watch_dir)
        await wait_for(pilot, lambda: "e1" in table_rows(app), timeout=20, what="the save evaluated as e1")
        assert table_rows(app)["e1"][1] == status
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        review = app.screen
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the confirmation")
        question = str(app.screen.query_one("#confirm-question").content)
        assert f"verdict is {status.upper()}" in question and "Approve it anyway?" in question
        assert f"approved as {status}" in question
        await pilot.press("n")  # no: nothing lands
        await wait_for(pilot, lambda: app.screen is review)
        await pilot.pause(0.2)
        assert not session.approved and git(p.root, "rev-parse", "HEAD").strip() == head
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the confirmation again")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.panel.records["e1"].approved_commit != "", timeout=20, what="approval")
        commit = app.panel.records["e1"].approved_commit
        assert "APPROVED as commit" in title(app)
    message = git(p.root, "log", "-1", "--format=%B", commit)
    assert message.startswith(f"kernelpilot: [{status.upper()}] engineer edit: ")
    assert f"Kernelpilot-Verdict: {status}" in message
    assert git(p.root, "rev-parse", f"{commit}^").strip() == head
