"""SVG snapshots of the main screen and the review screen (fixed size, fixed GPU reading, no clock).

Update the baselines with ``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` and look at them.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Input

from kernelpilot.agent import events as ev
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.review import ReviewScreen
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, script, table_rows, wait_for

SIZE = (140, 40)


def make_app(events: list[ev.Event]) -> KernelpilotApp:
    startup = Startup(session=EventStreamSession(events), model="replay: demo.jsonl", replay=True,
                      budgets={"max_turns": 40, "max_cost_usd": 5.0})
    return KernelpilotApp(startup, gpu_source=GPU, gpu_interval=0, clock=lambda: 0.0)


async def _steady(pilot: Any, app: KernelpilotApp, review: bool) -> None:
    await wait_for(pilot, lambda: len(table_rows(app)) == 2, what="candidates")
    if review:
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="review")
    for widget in app.query(Input):
        widget.cursor_blink = False
    await wait_for(pilot, lambda: not app.busy.display, what="idle")
    await pilot.pause(0.3)


def test_main_screen(snap_compare: Any) -> None:
    events = [e for e in script() if not isinstance(e, ev.ProposalReady)]
    events.append(ev.AssistantMessage(text="c2 is **1.62x** faster than eager; c1 was wrong. Proposing c2 next.",
                                      turn=2, at=1_700_000_000.0))
    app = make_app(events)

    async def run_before(pilot: Any) -> None:
        await _steady(pilot, app, review=False)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_review_screen(snap_compare: Any) -> None:
    app = make_app(script())

    async def run_before(pilot: Any) -> None:
        await _steady(pilot, app, review=True)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_review_screen_side_by_side(snap_compare: Any) -> None:
    app = make_app(script())

    async def run_before(pilot: Any) -> None:
        await _steady(pilot, app, review=True)
        await pilot.press("s")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
