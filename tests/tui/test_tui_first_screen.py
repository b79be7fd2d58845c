"""The first five minutes: the problem card, /problem, the layouts by terminal size, and the no-GPU path.

Real Textual Pilot runs of the app on the real softmax example (analysed on the meta device by the
real ``problem.analyse``); the baselines come from fixture JSON (``FixtureBaselines``: CI has no GPU).
"""

from __future__ import annotations

import argparse
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Sparkline

from kernelpilot.agent import events as ev
from kernelpilot.problem import load_problem
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.engine_thread import EngineThread
from kernelpilot.tui.gpu import FixedGpuSource
from kernelpilot.tui.problem_card import ProblemCard
from kernelpilot.tui.review import ReviewScreen
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from kernelpilot.tui.verdict_view import verdict_text
from tui_support import DATA_DIR, GPU, SOFTMAX, FixtureBaselines, conversation_text, table_rows, wait_for

AT = 1_700_000_000.0


def build_only_verdict() -> dict[str, Any]:
    return json.loads((DATA_DIR / "verdicts" / "build_only.json").read_text())


def make_app(tmp_path: Path, evaluator: Any = None, *, gpu: bool = True, events: list[ev.Event] | None = None,
             model: str = "", edit: Any = None, engine: EngineThread | None = None) -> KernelpilotApp:
    worktree = tmp_path / "wt"
    watch = worktree / "kernels" / "softmax"
    watch.mkdir(parents=True, exist_ok=True)
    for name in ("softmax.cu", "binding.cpp", "model_new.py"):
        (watch / name).write_text("// candidate\n")
    started = ev.SessionStarted(session_id="s-first", problem="problem", model=model or "manual", at=AT)
    startup = Startup(session=EventStreamSession([started, *(events or [])]), model=model, worktree=worktree,
                      watch_dir=watch, problem=load_problem(SOFTMAX), gpu=gpu, evaluator=evaluator,
                      engine=engine or EngineThread(), edit_evaluator=edit)
    return KernelpilotApp(startup, gpu_source=GPU if gpu else FixedGpuSource(None), gpu_interval=0,
                          clock=lambda: 0.0)


def card_text(app: KernelpilotApp, index: int = 0) -> str:
    return list(app.query(ProblemCard))[index].plain


def analysed(app: KernelpilotApp) -> bool:
    return app.card_facts is not None and app.card_facts.info is not None


async def test_card_says_what_the_problem_is_then_what_it_costs(tmp_path: Path) -> None:
    release = threading.Event()
    baselines = FixtureBaselines(release)
    app = make_app(tmp_path, baselines)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: analysed(app), timeout=60, what="the problem analysis")
        text = card_text(app)
        assert "softmax  problem.py" in text
        assert "input     32768×16384 bfloat16 (1.00 GiB)" in text
        assert "output    32768×16384 bfloat16 (1.00 GiB)" in text
        assert "moves     2.00 GiB at least · no FLOPs counted" in text
        assert "timing eager and torch.compile on the GPU…" in text
        watched = tmp_path / "wt" / "kernels" / "softmax" / "softmax.cu"
        assert f"edit      {watched}\n" in text and "ctrl+o opens it in $EDITOR" in text
        # the baselines are still being measured: the UI answers meanwhile
        assert any("timing eager and torch.compile" in label for label in app.busy.active)
        await pilot.press(*"/help", "enter")
        await wait_for(pilot, lambda: "Anything else you type" in conversation_text(app), what="/help while measuring")
        release.set()
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.baselines is not None,
                       what="the baselines")
        text = card_text(app)
        assert "floor     0.505 ms, memory-bound at 4.25 TB/s (measured on NVIDIA H200)" in text
        assert "eager     0.957 ms (53% of speed of light)" in text
        assert "compile   1.124 ms (45% of speed of light)" in text
        assert not app.busy.display
        assert baselines.calls == [SOFTMAX.resolve()] and baselines.threads[0].startswith("kp-engine")
        assert baselines.readable == [tmp_path / "wt"]  # the worker it starts may read the worktree's edits

        await pilot.press(*"/problem", "enter")
        await wait_for(pilot, lambda: len(app.query(ProblemCard)) == 2, what="/problem")
        assert card_text(app, 1) == card_text(app, 0)
        await pilot.press("ctrl+q")


async def test_the_card_names_the_watched_file_and_the_edit_key_opens_exactly_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The card gives the absolute path of the worktree's copy (the one that is watched), says the checkout's
    copy is not, and ctrl+o opens that file and no other (headless here: the editor cannot take the terminal,
    so the notification names the file)."""
    monkeypatch.setenv("EDITOR", "my-editor")
    app = make_app(tmp_path, gpu=False)
    watched = tmp_path / "wt" / "kernels" / "softmax" / "softmax.cu"
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for(pilot, lambda: app.card_facts is not None, what="the card")
        text = card_text(app)
        assert f"edit      {watched}\n" in text
        assert "the session's copy in its worktree: saves to your checkout's copy are not evaluated" in text
        assert app.edit_target_file() == watched
        await pilot.press("ctrl+t")  # focus elsewhere: the key still opens the card's file
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: any("my-editor" in str(n.message) for n in app._notifications), what="editor")
        said = next(str(n.message) for n in app._notifications if "my-editor" in str(n.message))
        assert f"Open {watched} yourself." in said and "binding.cpp" not in said


async def test_the_edit_key_with_an_empty_candidate_directory_says_where_to_write(tmp_path: Path) -> None:
    app = make_app(tmp_path, gpu=False)
    watch = tmp_path / "wt" / "kernels" / "softmax"
    for f in watch.iterdir():
        f.unlink()
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for(pilot, lambda: app.card_facts is not None, what="the card")
        assert f"write model_new.py, binding.cpp and a .cu kernel in {watch}/" in card_text(app)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: bool(app._notifications), what="the notification")
        assert f"No candidate file yet: write model_new.py, binding.cpp and a .cu kernel in {watch}/." in str(
            list(app._notifications)[-1].message)
        (watch / "kernel.cu").write_text("// now there is one\n")
        assert app.edit_target_file() == watch / "kernel.cu"  # found once it exists, and the card names it
        assert app.card_facts is not None and app.card_facts.edit_file == str(watch / "kernel.cu")


async def test_a_save_during_the_baselines_is_judged_first_and_they_follow(tmp_path: Path) -> None:
    """The engineer saves while this session's baselines are being measured (a cold launch: 15-18 s on an H100):
    the save's evaluation goes first, the card says the baselines wait for it, and they are measured after its
    verdict, on the same engine thread, in that order."""
    release = threading.Event()
    order: list[str] = []

    class Baselines(FixtureBaselines):
        def baselines(self, problem: Path, **kw: Any) -> Any:
            order.append("baselines")
            return super().baselines(problem, **kw)

    baselines = Baselines(release)

    class Saves:  # the launcher's manual-mode evaluator: the baselines deferred, then the save on the engine thread
        def cancel(self) -> bool:  # a newer save's cancel of an evaluation: it leaves the baselines alone
            return False

        def close(self) -> None:
            pass

        def evaluate_edit(self, paths: list[Path]) -> ev.CandidateEvaluated:
            baselines.defer_baselines()  # as WorkspaceEditEvaluator does once the launch's build is done
            verdict = engine.call(lambda: order.append("save") or build_only_verdict())
            return ev.CandidateEvaluated(candidate_id="e1", verdict=verdict, source="engineer", at=AT)

    engine = EngineThread()
    app = make_app(tmp_path, baselines, edit=Saves(), engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: order == ["baselines"] and app.watcher is not None, timeout=60,
                       what="the baselines in flight")
        (tmp_path / "wt" / "kernels" / "softmax" / "softmax.cu").write_text("// the engineer's save\n")
        await wait_for(pilot, lambda: "e1" in table_rows(app), timeout=30, what="the save's verdict")
        assert order[:2] == ["baselines", "save"]  # it did not wait for them
        await wait_for(pilot, lambda: "timed after your save's verdict" in card_text(app), what="the card says so")
        release.set()
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.baselines is not None,
                       what="the baselines after the save")
        assert order == ["baselines", "save", "baselines"] and baselines.deferrable == [True, True]
        assert "eager     0.957 ms" in card_text(app) and "after your save" not in card_text(app)
        await pilot.press("ctrl+q")


async def test_the_card_shows_the_baselines_before_torch_compiles_own_check_is_made(tmp_path: Path) -> None:
    """A pairing session's baselines come without torch.compile's own check (3.1-3.9 s of their measurement on an
    H100): the card draws their times, then the session asks for the check alone, on the engine thread, with the
    problem and the worktree the baselines were measured with."""
    release = threading.Event()
    asked: list[tuple[Path, list[Path], str]] = []

    class Baselines(FixtureBaselines):
        def check_compiled(self, problem: Path, *, readable: list[Path] | None = None) -> str:
            asked.append((Path(problem), list(readable or []), threading.current_thread().name))
            release.wait(30)  # the check in flight: the card must be drawn meanwhile
            return "passed"

    baselines = Baselines()
    app = make_app(tmp_path, baselines)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(asked) and app.card_facts is not None
                       and app.card_facts.baselines is not None, timeout=60, what="the check asked, the card drawn")
        assert "eager     0.957 ms" in card_text(app) and not release.is_set()
        (problem, readable, thread), = asked
        assert problem == baselines.calls[0] and readable == baselines.readable
        assert thread == baselines.threads[0] and baselines.deferrable == [True]
        release.set()
        await pilot.press("ctrl+q")


async def test_baselines_that_fail_say_why(tmp_path: Path) -> None:
    app = make_app(tmp_path, FixtureBaselines(fail="CUDA out of memory: tried to allocate 2.00 GiB"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: analysed(app) and bool(app.card_facts and app.card_facts.baselines_error),
                       timeout=60, what="the failure")
        assert "baselines not measured: CUDA out of memory: tried to allocate 2.00 GiB" in card_text(app)
        await pilot.press("ctrl+q")


async def test_without_a_gpu_the_card_and_an_edit_say_what_needs_one(tmp_path: Path) -> None:
    baselines = FixtureBaselines()
    edit = ev.CandidateEvaluated(candidate_id="e1", verdict=build_only_verdict(), source="engineer", at=AT)
    app = make_app(tmp_path, baselines, gpu=False, events=[edit])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: analysed(app) and "e1" in table_rows(app), timeout=60, what="card and edit")
        text = card_text(app)
        assert "floor     needs this GPU's measured ceilings: no GPU is visible" in text
        assert "eager and torch.compile times need a GPU; none is visible" in text
        assert "so saves get build-only verdicts (registers, spills)" in text
        assert "agent     none: restart with --model anthropic/claude-sonnet-4-5" in text
        assert baselines.calls == []  # nothing asked of a GPU that is not there
        row = table_rows(app)["e1"]
        assert row[1] == "built" and row[2:7] == ["—"] * 5  # never ok, never crashed, nothing timed
        assert app.query_one(Sparkline).data == [] and not app.query_one(Sparkline).display
        assert "nothing timed yet" in str(app.query_one("#spark-label").content)
        assert ("your edit e1: built in 3.1 s; scale_kernel: 16 registers, no spills; 1 warning — correctness "
                "and timing need a GPU") in conversation_text(app)
        assert "each save is built (no GPU: build-only verdicts)" in str(app.query_one("#banner").content)
        app.open_review(app.panel.records["e1"])
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review")
        console = Console(record=True, width=100, file=io.StringIO())
        console.print(verdict_text(app.panel.records["e1"].verdict))
        body = console.export_text()
        assert body.startswith("BUILT") and "Build-only verdict: correctness and timing need a GPU" in body
        assert "scale_kernel sm_90: 16 registers, 0 B shared, no spills" in body
        await pilot.press("ctrl+q")


@pytest.mark.parametrize(("size", "layout", "visible"), [((80, 24), "hidden", False), ((120, 40), "stacked", True),
                                                         ((200, 55), "side", True)])
async def test_layout_keeps_the_conversation_readable(tmp_path: Path, size: tuple[int, int], layout: str,
                                                      visible: bool) -> None:
    app = make_app(tmp_path, FixtureBaselines())
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.startup is not None, what="startup")
        assert app.layout_name == layout and app.candidates_visible is visible
        assert app.conversation.size.width >= min(size[0] - 4, 110)
        assert app.panel.size.height == 0 or app.panel.region.y >= app.conversation.region.y
        if layout == "hidden":  # the panel's own key shows it below the conversation, and hides it again
            await pilot.press("ctrl+t")
            await pilot.pause()
            assert app.candidates_visible and app.panel.region.y > app.conversation.region.y
            assert app.focused is app.panel.table
            await pilot.press("ctrl+t")
            await pilot.pause()
            assert not app.candidates_visible and app.focused is app.query_one("#prompt")
        await pilot.press("ctrl+q")


def test_build_startup_without_a_gpu_gives_build_only_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real launcher: no GPU visible -> the problem card's sources are set and a save is built, not run."""
    from agent_support import make_project
    from kernelpilot.config import load_config
    from kernelpilot.tui.launch import build_startup

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    problem = make_project(tmp_path / "proj")
    config = load_config(problem.parent, overrides={"problem": str(problem)}, env={})
    args = argparse.Namespace(path=str(problem.parent), model=None, replay=None, resume=None, config=config,
                              problem=problem)
    startup = build_startup(args, None)
    try:
        assert startup.gpu is False and startup.problem.path == problem.resolve()
        assert callable(getattr(startup.evaluator, "baselines", None)) and startup.engine is not None
        assert "build-only" in startup.banner()
        watch = startup.watch_dir
        watch.mkdir(parents=True)
        (watch / "model_new.py").write_text("import torch\n")  # no ModelNew: refused before nvcc, in seconds
        assert startup.edit_evaluator is not None
        event = startup.edit_evaluator.evaluate_edit([watch / "model_new.py"])
        assert event.verdict["mode"] == "build" and event.verdict["status"] == "build_error"
    finally:
        if startup.edit_evaluator is not None:
            startup.edit_evaluator.close()
        if startup.engine is not None:
            startup.engine.close()
