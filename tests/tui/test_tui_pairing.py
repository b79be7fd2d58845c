"""The app over the real agent loop (ScriptedClient + AgentSession), a real git project and worktree,
and the fixture evaluator double (the GPU is out of reach in CI): approve lands a commit, reject
reaches the loop, and the engineer's own saves are noticed, evaluated and reported to the agent."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from agent_support import FixtureEvaluator, candidate_files, git, open_project
from kernelpilot.agent.events import SessionStarted
from kernelpilot.agent.loop import AgentSession, Budgets
from kernelpilot.agent.scripted import ScriptedClient
from kernelpilot.landing import approve
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.pairing import AgentEditEvaluator, WorkspaceEditEvaluator
from kernelpilot.tui.review import ReasonModal, ReviewScreen
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, conversation_text, table_rows, wait_for

D = "kernels/vector_scale"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def write_turn() -> dict[str, Any]:
    return {"text": "Writing a first candidate.",
            "tool_calls": [call("write_file", path=f"{D}/{n}", content=c) for n, c in candidate_files().items()]}


def agent_app(tmp_path: Path, turns: list[dict[str, Any]]) -> tuple[KernelpilotApp, Any, ScriptedClient]:
    p = open_project(tmp_path)
    client = ScriptedClient(turns, name="tui-test")
    session = AgentSession(p.problem, p.workspace, FixtureEvaluator(["vector_scale_ok.json"]), client,
                           Budgets(max_turns=20), p.config, auto_approve=None)
    startup = Startup(session=session, model=client.label, replay=True, worktree=p.workspace.path,
                      watch_dir=p.workspace.path / D, edit_evaluator=AgentEditEvaluator(session),
                      workspace=p.workspace, budgets=dict(p.config.budgets))
    return KernelpilotApp(startup, gpu_source=GPU, watch_interval=0.1), p, client


PROPOSE = [write_turn(), {"text": "Benchmarking.", "tool_calls": [call("benchmark")]},
           {"text": "Proposing.", "tool_calls": [call("propose", summary="one thread per element, float4 loads")]},
           {"text": "Noted; I will keep going."}]


async def test_approve_lands_a_commit_in_the_users_repository(tmp_path: Path) -> None:
    app, p, _ = agent_app(tmp_path, PROPOSE)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), timeout=30, what="proposal")
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        assert "kernel.cu" in screen.record.diff
        await pilot.press("a")
        await wait_for(pilot, lambda: screen.record.approved_commit != "", timeout=30, what="approval")
        commit = screen.record.approved_commit
        assert "APPROVED as commit" in str(app.screen.query_one("#review-title").content)
    assert git(p.root, "cat-file", "-t", commit).strip() == "commit"
    assert commit in git(p.root, "log", "--all", "--format=%H")
    shown = git(p.root, "show", "--stat", commit)
    assert "kernel.cu" in shown


async def test_review_says_approving_while_the_gate_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the sanitizer gate takes most of a minute: the review screen must say what is going on."""
    import asyncio
    import threading

    from kernelpilot.agent.approval import ProposalMixin

    gate_open = threading.Event()  # the session may run on another thread's event loop

    async def slow_gate(self: Any, cid: str) -> tuple[bool, str]:
        while not gate_open.is_set():
            await asyncio.sleep(0.05)
        return True, ""

    monkeypatch.setattr(ProposalMixin, "_sanitizer_gate", slow_gate)
    app, p, _ = agent_app(tmp_path, PROPOSE)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), timeout=30, what="proposal")
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await pilot.press("a")
        title = lambda: str(screen.query_one("#review-title").content)  # noqa: E731
        await wait_for(pilot, lambda: "approving" in title(), timeout=10, what="approving title")
        await pilot.press("a")  # a second press while it runs does not approve twice
        assert screen.record.approved_commit == ""
        gate_open.set()
        await wait_for(pilot, lambda: "APPROVED as commit" in title(), timeout=30, what="approval")
        assert "approving" not in title()
    assert screen.record.approved_commit in git(p.root, "log", "--all", "--format=%H")


async def test_reject_reason_reaches_the_agent_loop(tmp_path: Path) -> None:
    app, p, client = agent_app(tmp_path, PROPOSE)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), timeout=30, what="proposal")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonModal))
        await pilot.press(*"use a grid-stride loop", "enter")

        def model_saw_it() -> bool:
            return any("use a grid-stride loop" in str(m.get("content")) for r in client.requests for m in r)

        await wait_for(pilot, model_saw_it, timeout=30, what="reason in the next model request")
        assert table_rows(app)["c1"][1] == "rejected"


async def test_engineer_edit_is_evaluated_and_reported_to_the_agent(tmp_path: Path) -> None:
    turns = [write_turn(), {"text": "Benchmarking.", "tool_calls": [call("benchmark")]},
             {"text": "Your turn: edit the kernel if you like."}, {"text": "I see your edit."}]
    app, p, client = agent_app(tmp_path, turns)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: "Your turn" in conversation_text(app), timeout=30, what="agent waiting")
        assert list(table_rows(app)) == ["c1"]  # the agent's own writes were not taken for edits
        kernel = p.workspace.path / D / "kernel.cu"
        kernel.write_text(kernel.read_text() + "\n// engineer: unrolled by hand\n")
        await wait_for(pilot, lambda: "c2" in table_rows(app), timeout=30, what="engineer candidate")
        assert table_rows(app)["c2"][0] == "c2 ✎"
        assert app.panel.records["c2"].source == "engineer"
        assert "unrolled by hand" in app.panel.records["c2"].diff

        def agent_told() -> bool:
            return any("The engineer edited" in str(m.get("content")) and "kernel.cu" in str(m.get("content"))
                       for r in client.requests for m in r)

        await wait_for(pilot, agent_told, timeout=30, what="agent told about the edit")


async def test_manual_mode_banner_edit_detection_and_approve(tmp_path: Path) -> None:
    p = open_project(tmp_path)
    fixture = FixtureEvaluator(["vector_scale_ok.json"])
    ws = p.workspace
    started = SessionStarted(session_id=ws.session_id, problem=p.problem.name, model="manual",
                             worktree=str(ws.path), branch=ws.branch)
    session = EventStreamSession([started], on_approve=partial(approve, ws), on_reject=ws.reject)
    watch_dir = ws.path / D
    edit = WorkspaceEditEvaluator(ws, watch_dir, lambda d: fixture.evaluate(p.problem, d))
    startup = Startup(session=session, model="", worktree=ws.path, watch_dir=watch_dir, edit_evaluator=edit,
                      workspace=ws)
    app = KernelpilotApp(startup, gpu_source=GPU, watch_interval=0.1)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.query_one("#banner").display, what="banner")
        banner = str(app.query_one("#banner").content)
        assert "Manual mode" in banner and "--model" in banner and "kernelpilot.toml" in banner
        watch_dir.mkdir(parents=True, exist_ok=True)
        for name, text in candidate_files().items():
            (watch_dir / name).write_text(text)
        await wait_for(pilot, lambda: "e1" in table_rows(app), timeout=20, what="engineer candidate e1")
        assert fixture.calls and fixture.calls[0][0] == "benchmark"
        assert table_rows(app)["e1"][1] == "ok"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("a")
        await wait_for(pilot, lambda: bool(session.approved) and app.panel.records["e1"].approved_commit != "",
                       timeout=20, what="approve")
        commit = app.panel.records["e1"].approved_commit
    assert git(p.root, "cat-file", "-t", commit).strip() == "commit"
    assert "kernel.cu" in git(p.root, "show", "--stat", commit)


async def test_a_save_shows_its_test_verdict_before_its_benchmark(tmp_path: Path) -> None:
    """Manual mode on a GPU: the test verdict (a kernel edit's is about a second) is drawn as soon as it is known,
    the benchmark's then replaces it in the same row; a build the launch started is waited for first."""
    import threading

    p = open_project(tmp_path)
    fixture = FixtureEvaluator(["vector_scale_ok.json"])
    gate = threading.Event()  # the benchmark answers only once the test's verdict has been drawn
    ws = p.workspace
    started = SessionStarted(session_id=ws.session_id, problem=p.problem.name, model="manual",
                             worktree=str(ws.path), branch=ws.branch)
    session = EventStreamSession([started], on_approve=partial(approve, ws), on_reject=ws.reject)
    watch_dir = ws.path / D
    waited: list[bool] = []

    def benchmark(d: Path) -> Any:
        assert gate.wait(20)
        return fixture.evaluate(p.problem, d, mode="benchmark")

    edit = WorkspaceEditEvaluator(ws, watch_dir, lambda d: fixture.evaluate(p.problem, d, mode="test"),
                                  then=benchmark, before=lambda: waited.append(True))
    startup = Startup(session=session, model="", worktree=ws.path, watch_dir=watch_dir, edit_evaluator=edit,
                      workspace=ws)
    app = KernelpilotApp(startup, gpu_source=GPU, watch_interval=0.1)
    async with app.run_test(size=(140, 40)) as pilot:
        watch_dir.mkdir(parents=True, exist_ok=True)
        for name, text in candidate_files().items():
            (watch_dir / name).write_text(text)
        await wait_for(pilot, lambda: "e1" in app.panel.records, timeout=20, what="the test verdict drawn")
        assert app.panel.records["e1"].verdict.mode == "test" and table_rows(app)["e1"][1] == "ok"
        gate.set()
        await wait_for(pilot, lambda: app.panel.records["e1"].verdict.mode == "benchmark", timeout=20,
                       what="the benchmark's verdict in the same row")
        assert [c[0] for c in fixture.calls] == ["test", "benchmark"] and waited == [True]
        assert list(app.panel.records) == ["e1"]


def test_a_save_defers_the_sessions_baselines_once_the_launch_build_is_done(tmp_path: Path) -> None:
    """A save made right after launch waits for the session's first full build; the session's baselines (their cold
    torch.compile, which the save's benchmark needs too) go on meanwhile and give way only then, right before the
    save's evaluation (H100, 2026-12-07: deferred at once, a save at 4.2 s was drawn 22.5 s later)."""
    import threading
    import time

    p = open_project(tmp_path)
    fixture = FixtureEvaluator(["vector_scale_ok.json"])
    ws = p.workspace
    watch_dir = ws.path / D
    watch_dir.mkdir(parents=True, exist_ok=True)
    for name, text in candidate_files().items():
        (watch_dir / name).write_text(text)
    built = threading.Event()
    order: list[str] = []

    def launch_build() -> None:
        order.append("waits for the launch's build")
        assert built.wait(20)
        order.append("built")

    def evaluate(d: Path) -> Any:
        order.append("evaluated")
        return fixture.evaluate(p.problem, d, mode="test")

    edit = WorkspaceEditEvaluator(ws, watch_dir, evaluate, before=launch_build,
                                  defer=lambda: order.append("baselines deferred") or True)
    done: list[Any] = []
    save = threading.Thread(target=lambda: done.append(edit.evaluate_edit([watch_dir / "kernel.cu"])))
    save.start()
    deadline = time.monotonic() + 20
    while not order and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert order == ["waits for the launch's build"]  # the baselines go on while the save cannot use the worker
    built.set()
    save.join(30)
    assert order == ["waits for the launch's build", "built", "baselines deferred", "evaluated"]
    assert done and done[0].verdict["status"] == "ok"


async def test_a_staged_benchmark_draws_its_test_verdict_first_and_verifies_once(tmp_path: Path) -> None:
    """Manual mode on a GPU, as the launcher wires it: one benchmark per save, whose test verdict (from its own
    verification, Evaluator.evaluate's ``on_tested``) is drawn before its timing ends; no separate test request."""
    import threading

    p = open_project(tmp_path)
    fixture = FixtureEvaluator(["vector_scale_ok.json"])
    gate = threading.Event()  # the timing ends only once the test verdict has been drawn
    ws = p.workspace
    started = SessionStarted(session_id=ws.session_id, problem=p.problem.name, model="manual",
                             worktree=str(ws.path), branch=ws.branch)
    session = EventStreamSession([started], on_approve=partial(approve, ws), on_reject=ws.reject)
    watch_dir = ws.path / D

    def staged(d: Path, tested: Any) -> Any:
        tested(fixture.evaluate(p.problem, d, mode="test"))  # what the worker stages before timing
        assert gate.wait(20)
        return fixture.evaluate(p.problem, d, mode="benchmark")

    def never(_d: Path) -> Any:
        raise AssertionError("a save on a GPU is judged by its staged benchmark alone")

    edit = WorkspaceEditEvaluator(ws, watch_dir, never, staged=staged)
    startup = Startup(session=session, model="", worktree=ws.path, watch_dir=watch_dir, edit_evaluator=edit,
                      workspace=ws)
    app = KernelpilotApp(startup, gpu_source=GPU, watch_interval=0.1)
    async with app.run_test(size=(140, 40)) as pilot:
        watch_dir.mkdir(parents=True, exist_ok=True)
        for name, text in candidate_files().items():
            (watch_dir / name).write_text(text)
        await wait_for(pilot, lambda: "e1" in app.panel.records, timeout=20, what="the test verdict drawn")
        assert app.panel.records["e1"].verdict.mode == "test" and table_rows(app)["e1"][1] == "ok"
        assert ws.candidates["e1"].verdict == "ok"  # approval meanwhile goes by the test verdict
        gate.set()
        await wait_for(pilot, lambda: app.panel.records["e1"].verdict.mode == "benchmark", timeout=20,
                       what="the benchmark's verdict in the same row")
        assert list(app.panel.records) == ["e1"]


def test_build_startup_without_a_model_is_manual_mode(tmp_path: Path) -> None:
    from agent_support import make_project
    from kernelpilot.config import load_config
    from kernelpilot.tui.launch import build_startup

    problem = make_project(tmp_path / "proj")
    config = load_config(problem.parent, overrides={"problem": str(problem)}, env={})
    args = argparse.Namespace(path=str(problem.parent), model=None, replay=None, resume=None, config=config,
                              problem=problem)
    startup = build_startup(args, None)
    try:
        assert startup.manual and startup.model == ""
        assert startup.watch_dir == startup.worktree / "kernels" / "vector_scale"
        assert "--model anthropic/claude-sonnet-4-5" in startup.banner()
        assert isinstance(startup.session, EventStreamSession)
    finally:
        if startup.edit_evaluator is not None:
            startup.edit_evaluator.close()


async def test_quit_mid_evaluation_cancels_the_session_cleanly(tmp_path: Path) -> None:
    from kernelpilot.agent.transcript import Transcript

    p = open_project(tmp_path)
    slow = FixtureEvaluator(["vector_scale_ok.json"], delay_s=60)
    client = ScriptedClient([write_turn(), {"text": "Benchmarking.", "tool_calls": [call("benchmark")]}],
                            name="tui-test")
    transcript = Transcript(tmp_path / "t.jsonl")
    session = AgentSession(p.problem, p.workspace, slow, client, Budgets(max_turns=20), p.config,
                           transcript=transcript, auto_approve=None)
    startup = Startup(session=session, model=client.label, replay=True, worktree=p.workspace.path,
                      watch_dir=p.workspace.path / D, edit_evaluator=AgentEditEvaluator(session),
                      workspace=p.workspace)
    app = KernelpilotApp(startup, gpu_source=GPU)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: "benchmark" in " ".join(app.busy.active), timeout=30, what="evaluation")
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: not app.is_running, timeout=20, what="quit")
    assert app.return_code == 0  # run() ended by itself within the grace period
    events = Transcript(tmp_path / "t.jsonl").load().events
    assert events[-1].kind == "done" and events[-1].reason == "cancelled"  # type: ignore[attr-defined]
    wt = p.workspace.path
    assert not (Path(git(wt, "rev-parse", "--absolute-git-dir").strip()) / "index.lock").exists()
    assert not session.book.records  # no half-done checkpoint
    for name, text in candidate_files().items():
        assert (wt / D / name).read_text() == text
