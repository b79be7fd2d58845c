"""SVG snapshots of the main screen and the review screen (fixed size, fixed GPU reading, no clock).

Update the baselines with ``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` and look at them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
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


# ---- the first screen at three terminal sizes (the problem card with the baselines filled in) ------

def first_screen(name: str, gpu: bool = True, events: list[ev.Event] | None = None) -> KernelpilotApp:
    """The card names the candidate file by its absolute path: the worktree is put at a fixed path
    (``$TMPDIR/kernelpilot-snapshots/NAME``), so the picture is the same on every run."""
    import shutil
    import tempfile
    from pathlib import Path

    from test_tui_first_screen import make_app
    from tui_support import FixtureBaselines

    fixed = Path(tempfile.gettempdir()) / "kernelpilot-snapshots" / name
    shutil.rmtree(fixed, ignore_errors=True)
    return make_app(fixed, FixtureBaselines(), gpu=gpu, events=events)


async def _card_ready(pilot: Any, app: KernelpilotApp, gpu: bool = True) -> None:
    def ready() -> bool:
        f = app.card_facts
        return f is not None and f.info is not None and (f.baselines is not None or not gpu)

    await wait_for(pilot, ready, timeout=60, what="the problem card")
    for widget in app.query(Input):
        widget.cursor_blink = False
    await wait_for(pilot, lambda: not app.busy.display, what="idle")
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 55)], ids=["80x24", "120x40", "200x55"])
def test_first_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    app = first_screen(f"first-{size[0]}x{size[1]}")

    async def run_before(pilot: Any) -> None:
        await _card_ready(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_first_screen_without_a_gpu_after_an_edit(snap_compare: Any) -> None:
    from test_tui_first_screen import build_only_verdict

    edit = ev.CandidateEvaluated(candidate_id="e1", verdict=build_only_verdict(), source="engineer",
                                 at=1_700_000_000.0)
    app = first_screen("no-gpu-edit", gpu=False, events=[edit])

    async def run_before(pilot: Any) -> None:
        await _card_ready(pilot, app, gpu=False)
        await wait_for(pilot, lambda: "e1" in table_rows(app), what="the edit")
        await pilot.press("ctrl+t")  # the candidates panel, hidden at 80x24, shown by its key
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


# ---- the README's screenshot -------------------------------------------------------------------------------------

README_VERDICT = Path(__file__).parents[2] / "examples" / "results" / "2026-11-30" / "softmax.json"


def test_readme_screenshot(snap_compare: Any) -> None:
    """README.md shows this snapshot (``__snapshots__/test_tui_snapshots/test_readme_screenshot.svg``): the
    pairing screen at 120x40 in manual mode on the softmax example, the problem card with its baselines
    (fixture) and one saved edit with its verdict (the reference kernel's real H200 verdict, from
    examples/results). Fixed worktree path, fixed GPU reading, no clock: the picture is the same on every run."""
    import json

    verdict = json.loads(README_VERDICT.read_text())
    edit = ev.CandidateEvaluated(candidate_id="e1", verdict=verdict, source="engineer", at=1_700_000_000.0)
    app = first_screen("readme", events=[edit])

    async def run_before(pilot: Any) -> None:
        await _card_ready(pilot, app)
        await wait_for(pilot, lambda: "e1" in table_rows(app), what="the edit's verdict")
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
