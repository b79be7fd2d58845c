"""The first screen's card with the machine's cached baselines (issue 27 item 5): an earlier session's eager
and torch.compile times at once, labelled with their date, then this session's; a corrupt or locked cache
file is said in the conversation and the card goes on. Real Textual Pilot runs on the real softmax example,
the real SQLite cache file (the test's own, tests/conftest.py); this session's baselines from fixture JSON."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from kernelpilot.agent import events as ev
from kernelpilot.evaluation.baselines import machine_cache as mb
from kernelpilot.evaluation.baselines.service import current_identity
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.problem import load_problem
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.engine_thread import EngineThread
from kernelpilot.tui.problem_card import ProblemCard
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import BASELINES, GPU, SOFTMAX, FixtureBaselines, conversation_text, wait_for

EARLIER = 1_700_000_000.0  # 2023-11-14


class SessionBaselines(FixtureBaselines):
    """FixtureBaselines with the settings and GPU the Evaluator keys the machine's cache on."""

    settings = EvalSettings()
    gpu = None


def store_earlier(eager_ms: float = 0.9, compiled_ms: float = 1.2) -> None:
    """Baselines of the softmax example stored by an 'earlier session' on this machine."""
    b = Baselines.from_dict(json.loads(BASELINES.read_text()))
    assert b.eager is not None and b.compiled is not None
    b.eager.median_ms, b.compiled.median_ms = eager_ms, compiled_ms
    now = current_identity(None)  # timed on this machine, as it names itself
    b.gpu_uuid, b.driver, b.torch, b.clocks = now["gpu_uuid"], now["driver"], now["torch"], now["clocks"]
    b.triton, b.cuda = now["triton"], now["cuda"]
    mb.record(SOFTMAX.resolve(), EvalSettings(), None, b)
    with sqlite3.connect(mb.cache_file()) as db:
        db.execute("UPDATE baselines SET created_at = ?", (EARLIER,))
    assert mb.lookup(SOFTMAX, EvalSettings()) is not None, current_identity(None)


def make_app(tmp_path: Path, evaluator: Any) -> KernelpilotApp:
    worktree = tmp_path / "wt"
    watch = worktree / "kernels" / "softmax"
    watch.mkdir(parents=True, exist_ok=True)
    for name in ("softmax.cu", "binding.cpp", "model_new.py"):
        (watch / name).write_text("// candidate\n")
    started = ev.SessionStarted(session_id="s-cached", problem="problem", model="manual", at=EARLIER)
    startup = Startup(session=EventStreamSession([started]), worktree=worktree, watch_dir=watch,
                      problem=load_problem(SOFTMAX), gpu=True, evaluator=evaluator, engine=EngineThread())
    return KernelpilotApp(startup, gpu_source=GPU, gpu_interval=0, clock=lambda: 0.0)


def card_text(app: KernelpilotApp) -> str:
    return list(app.query(ProblemCard))[0].plain


async def test_cached_figures_first_labelled_then_this_sessions(tmp_path: Path) -> None:
    store_earlier()
    release = threading.Event()
    session = SessionBaselines(release)
    app = make_app(tmp_path, session)
    date = time.strftime("%Y-%m-%d", time.localtime(EARLIER))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.query(ProblemCard)), timeout=30, what="the card")
        mounted = time.monotonic()
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.cached is not None,
                       timeout=10, what="the cached baselines")
        assert time.monotonic() - mounted < 1.0  # no torch import, no worker: milliseconds, on a busy CPU
        assert app.card_facts is not None and app.card_facts.baselines is None  # this session's still timing
        text = card_text(app)
        # the floor from the cached ceilings, before the problem's analysis is needed
        assert f"eager     0.900 ms (56% of speed of light) · cached {date}" in text
        assert f"compile   1.200 ms (42% of speed of light) · cached {date}" in text
        assert "timing them again in this session…" in text
        assert any("timing eager and torch.compile" in label for label in app.busy.active)
        assert app.card_facts.cached.date() == date
        release.set()
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.baselines is not None,
                       what="this session's baselines")
        text = card_text(app)
        assert "eager     0.957 ms (53% of speed of light)" in text and "compile   1.124 ms" in text
        assert "· cached" not in text and "0.900" not in text and "again in this session" not in text
        assert session.calls == [SOFTMAX.resolve()]  # measured in this session all the same
        await pilot.press("ctrl+q")


async def test_a_failed_measurement_keeps_the_cached_figures_labelled(tmp_path: Path) -> None:
    store_earlier()
    app = make_app(tmp_path, SessionBaselines(fail="CUDA out of memory"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.card_facts and app.card_facts.baselines_error
                                           and app.card_facts.cached), timeout=30, what="failure and cache")
        text = card_text(app)
        assert "baselines not measured: CUDA out of memory" in text
        assert "eager     0.900 ms" in text and "cached " in text and "again in this session" not in text
        await pilot.press("ctrl+q")


async def test_a_corrupt_cache_file_never_breaks_the_card(tmp_path: Path) -> None:
    mb.cache_file().write_bytes(b"garbage, not SQLite\n" * 100)
    release = threading.Event()
    app = make_app(tmp_path, SessionBaselines(release))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "could not be read" in conversation_text(app), timeout=30,
                       what="the cache's message")
        said = conversation_text(app)
        assert f"the machine's baseline cache {mb.cache_file()} could not be read (file is not a database)" in said
        assert "the card shows this session's baselines only" in said
        assert "timing eager and torch.compile on the GPU…" in card_text(app)
        assert not app.errors  # said, not an error of the session
        release.set()
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.baselines is not None,
                       what="this session's baselines")
        assert "eager     0.957 ms" in card_text(app)
        await pilot.press(*"/help", "enter")  # the app answers as ever
        await wait_for(pilot, lambda: "Anything else you type" in conversation_text(app), what="/help")
        await pilot.press("ctrl+q")


async def test_a_locked_cache_file_never_breaks_the_card(tmp_path: Path) -> None:
    store_earlier()
    holder = sqlite3.connect(mb.cache_file(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        app = make_app(tmp_path, SessionBaselines())
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: "database is locked" in conversation_text(app)
                           and app.card_facts is not None and app.card_facts.baselines is not None,
                           timeout=30, what="the lock's message and this session's baselines")
            text = card_text(app)
            assert "eager     0.957 ms" in text and "· cached" not in text
            await pilot.press("ctrl+q")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
