"""Pilot tests driving the app with a scripted source of real Events (EventStreamSession)."""

from __future__ import annotations

from typing import Any

from textual.widgets import Collapsible, Input, Sparkline

from kernelpilot.agent import events as ev
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.review import ReasonModal, ReviewScreen
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, conversation_text, script, table_rows, wait_for


def make_app(events: list[ev.Event] | None = None, **kw: Any) -> tuple[KernelpilotApp, EventStreamSession]:
    session = EventStreamSession(script() if events is None else events)
    startup = Startup(session=session, model="replay: demo.jsonl", replay=True,
                      budgets={"max_turns": 40, "max_cost_usd": 5.0})
    return KernelpilotApp(startup, gpu_source=GPU, **kw), session


async def test_stream_tools_candidates_and_proposal_opens_review() -> None:
    app, session = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review screen")
        screen = app.screen
        assert isinstance(screen, ReviewScreen) and screen.record.candidate_id == "c2"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReviewScreen))

        text = conversation_text(app)
        assert "Reading the **problem**: a row softmax over 4096 columns." in text  # streamed, joined
        assert "write_file(path=kernels/softmax/kernel.cu" in text and "✓" in text
        rows = table_rows(app)
        assert list(rows) == ["c1", "c2"]
        assert rows["c1"][1] == "incorrect" and rows["c1"][2] == "fail 0/3"
        assert rows["c2"][1] == "proposed" and rows["c2"][4] == "1.62x" and rows["c2"][6] == "41%"
        assert app.query_one(Sparkline).data == [1.62]  # only what was measured: c1 was wrong, so no bar
        assert app.tokens == 1800 and abs(app.cost - 0.012) < 1e-9

        # the tool entry expands to the full output
        entry = app.query_one(Collapsible)
        assert entry.collapsed
        entry.collapsed = False
        await pilot.pause()
        assert "second line of output" in str(entry.query_one(".tool-result").content)


async def test_reject_with_reason_reaches_the_session() -> None:
    app, session = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review screen")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonModal))
        await pilot.press(*"too much shared memory")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(session.rejected), what="session.reject")
        assert session.rejected == [("c2", "too much shared memory")]
        await wait_for(pilot, lambda: "Rejected c2: too much shared memory" in conversation_text(app))
        assert table_rows(app)["c2"][1] == "rejected"


async def test_selecting_a_row_opens_its_review_and_diff_toggles() -> None:
    app, _ = make_app(events=[e for e in script() if not isinstance(e, ev.ProposalReady)])
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        app.action_focus_table()
        await pilot.press("enter")  # row c1
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        screen = app.screen
        assert isinstance(screen, ReviewScreen) and screen.record.candidate_id == "c1"
        await pilot.press("s")
        assert screen.side_by_side
        await pilot.press("escape")


async def test_message_goes_to_the_session_and_engineer_echo_is_not_doubled() -> None:
    app, session = make_app(events=script()[:4])
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: "Reading" in conversation_text(app))
        await pilot.click("#prompt")
        await pilot.press(*"try warp shuffles", "enter")
        await wait_for(pilot, lambda: session.sent == ["try warp shuffles"])
        await pilot.pause(0.2)
        assert conversation_text(app).count("you: try warp shuffles") == 1


async def test_errors_from_the_session_are_a_notification_and_a_log_entry() -> None:
    class Broken(EventStreamSession):
        async def run(self):  # type: ignore[override]
            yield ev.SessionStarted(session_id="s", problem="p", model="m")
            raise RuntimeError("the model server went away")

    app = KernelpilotApp(Startup(session=Broken(), model="m"), gpu_source=GPU)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.errors), what="error report")
        assert "the model server went away" in app.errors[0]
        assert "the model server went away" in conversation_text(app)
        assert any("went away" in str(n.message) for n in app._notifications)
        assert app.is_running


async def test_quit_cancels_the_session_cleanly() -> None:
    app, session = make_app(events=script()[:4])
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "Reading" in conversation_text(app))
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: not app.is_running, what="exit")
    assert session.cancelled
    assert app.return_code == 0


async def test_keys_are_configurable() -> None:
    app, session = make_app(keys={"review": "f5", "approve": "y"})
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReviewScreen))
        await pilot.press("ctrl+r")  # the default no longer opens the review
        await pilot.pause(0.1)
        assert not isinstance(app.screen, ReviewScreen)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("a")  # the default approve key is replaced by "y"
        await pilot.pause(0.2)
        assert session.approved == []
        await pilot.press("y")
        await wait_for(pilot, lambda: session.approved == ["c2"], what="approve via y")


async def test_spinner_shows_long_steps_with_elapsed_time() -> None:
    now = [100.0]
    events = script()[:5] + [ev.ToolCallStarted(call_id="t9", name="benchmark", arguments={})]
    app, session = make_app(events=events, clock=lambda: now[0])
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "benchmark" in " ".join(app.busy.active), what="tool spinner")
        now[0] += 42
        await pilot.pause(0.3)
        assert app.busy.display and "benchmark 42s" in str(app.busy.content)
        finished = ev.ToolCallFinished(call_id="t9", name="benchmark", result="ok", seconds=42)
        await app.runner.submit(session.emit, finished)
        await wait_for(pilot, lambda: "benchmark" not in " ".join(app.busy.active), what="tool done")
        assert app.busy.active == ["waiting for the model"]  # the model works on the result
        await app.runner.submit(session.emit, ev.AssistantMessage(text="Done for now.", turn=2))
        await wait_for(pilot, lambda: not app.busy.display, what="idle")


async def test_a_startup_failure_is_reported_not_a_crash() -> None:
    from kernelpilot.errors import WorkspaceError

    def factory(resume_id: str | None) -> Startup:
        raise WorkspaceError("/tmp/x is not inside a git repository; run `git init` there first.")

    app = KernelpilotApp(factory, gpu_source=GPU)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.errors), what="startup error")
        assert "not inside a git repository" in app.errors[0]
        assert "not inside a git repository" in conversation_text(app)
        assert not app.busy.display and app.is_running


async def test_a_proposal_does_not_pop_up_over_a_half_typed_message() -> None:
    events = script()
    app, session = make_app(events=events[:4])
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: "Reading" in conversation_text(app))
        await pilot.click("#prompt")
        await pilot.press(*"also try a")
        for e in events[4:]:
            await app.runner.submit(session.emit, e)
        await wait_for(pilot, lambda: "c2" in table_rows(app) and table_rows(app)["c2"][1] == "proposed")
        await pilot.press(*"r")  # still typing: this must not reject anything
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ReviewScreen) and session.rejected == []
        assert app.query_one("#prompt", Input).value == "also try ar"


async def test_typing_over_the_table_goes_to_the_input_box() -> None:
    """`/quit` + Enter typed while the candidates table has focus quits; it does not open a review."""
    app, session = make_app(events=[e for e in script() if not isinstance(e, ev.ProposalReady)])
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        app.action_focus_table()
        await pilot.pause()
        assert app.focused is app.panel.table
        await pilot.press("/", "q", "u", "i")
        prompt = app.query_one("#prompt", Input)
        assert prompt.value == "/qui" and app.focused is prompt
        app.action_focus_table()  # focus moved away in the middle of typing: the rest still goes to the box
        await pilot.pause()
        await pilot.press("t", "enter")
        await wait_for(pilot, lambda: not app.is_running, what="exit by /quit")
        assert not any(isinstance(s, ReviewScreen) for s in app.screen_stack)
    assert session.cancelled and app.return_code == 0


async def test_review_keys_still_act_on_the_review_screen() -> None:
    app, session = make_app(events=[e for e in script() if not isinstance(e, ev.ProposalReady)])
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        app.action_focus_table()
        await pilot.press("down", "enter")  # row c2
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("s")  # a review key, not typed into the input box
        assert app.screen.side_by_side  # type: ignore[attr-defined]
        assert app.query_one("#prompt", Input).value == ""
