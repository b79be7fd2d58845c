"""The first screen before the session exists (issue 49 item 4): with the launcher's ``CardPreview`` the problem
card is drawn at mount, its facts read from this machine's cache and the machine's cached baselines shown, while
the session (worktree, evaluation engine, its worker, the GPU) is still being set up: here a startup factory that
does not return until the test lets it. Real Textual Pilot runs; the cached facts are marked with a shape no
analysis gives, so they can only have come from the cache."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelpilot import problem_facts
from kernelpilot.agent import events as ev
from kernelpilot.evaluation.baselines.identity import current_identity
from kernelpilot.evaluation.baselines.machine_cache import BaselineTable, machine_key
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.problem import TensorSpec, analyse, load_problem
from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.gpu import FixedGpuSource
from kernelpilot.tui.problem_card import ProblemCard
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import CardPreview, Startup
from tui_support import BASELINES, DATA_DIR, wait_for

PROBLEM = DATA_DIR / "problems" / "softmax_bf16.py"


class HeldStartup:
    """A startup factory that blocks until ``release`` is set, like a session whose worktree and evaluation
    worker are still being set up; ``returned`` says whether it has handed the session over."""

    def __init__(self, problem: Path, worktree: Path) -> None:
        self.release = threading.Event()
        self.returned = False
        self.problem, self.worktree = problem, worktree

    def __call__(self, _resume: str | None) -> Startup:
        assert self.release.wait(60), "the test never let the session start"
        self.returned = True
        started = ev.SessionStarted(session_id="s-held", problem="softmax", model="manual")
        return Startup(session=EventStreamSession([started]), worktree=self.worktree,
                       problem=load_problem(self.problem), gpu=False)


@pytest.fixture
def problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the softmax problem whose cached facts say 3×5 (the file says 128×1000)."""
    monkeypatch.setenv("KERNELPILOT_BASELINES_CACHE", str(tmp_path / "cache" / "baselines.sqlite"))
    monkeypatch.delenv("KERNELPILOT_FACTS_CACHE", raising=False)
    path = tmp_path / "softmax.py"
    path.write_text(PROBLEM.read_text())
    info = analyse(load_problem(path), device="meta")
    problem_facts.store(path, replace(info, inputs=[TensorSpec((3, 5), "bfloat16", 30)]))
    return path


def card(app: KernelpilotApp) -> str:
    return list(app.query(ProblemCard))[0].plain


async def test_the_card_comes_from_the_cache_before_the_session_is_set_up(problem: Path, tmp_path: Path) -> None:
    factory = HeldStartup(problem, tmp_path / "wt")
    app = KernelpilotApp(factory, gpu_source=FixedGpuSource(None), gpu_interval=0,
                         preview=CardPreview(problem, manual=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.info is not None,
                       what="the card's facts")
        assert not factory.returned and app.startup is None  # no session, no engine, no worker yet
        text = card(app)
        assert text.startswith("softmax  softmax.py") and "input     3×5 bfloat16 (30 B)" in text
        assert "eager and torch.compile: starting the session…" in text
        factory.release.set()
        await wait_for(pilot, lambda: app.startup is not None, what="the session")
        await wait_for(pilot, lambda: "none is visible" in card(app), what="the card told there is no GPU")
        assert len(app.query(ProblemCard)) == 1 and "input     3×5 bfloat16" in card(app)
        await pilot.press("ctrl+q")


async def test_the_machines_cached_baselines_are_shown_before_the_session_is_set_up(problem: Path,
                                                                                   tmp_path: Path) -> None:
    settings = EvalSettings()
    table = BaselineTable(tmp_path / "cache" / "baselines.sqlite", wal=False)
    table.put(machine_key(problem.resolve(), settings, current_identity(None)), str(problem),
              json.loads(BASELINES.read_text()), at=1_700_000_000.0)
    table.close()
    factory = HeldStartup(problem, tmp_path / "wt")
    asked: list[Any] = []
    app = KernelpilotApp(factory, gpu_source=FixedGpuSource(None), gpu_interval=0,
                         preview=CardPreview(problem, settings=lambda: asked.append(1) or settings))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.cached is not None,
                       what="the cached baselines")
        assert not factory.returned and asked == [1]
        text = card(app)
        assert "eager     0.957 ms" in text and "cached 2023-11-1" in text
        factory.release.set()
        await wait_for(pilot, lambda: app.startup is not None, what="the session")
        await pilot.press("ctrl+q")


async def test_the_launchers_lookup_started_before_the_ui_loaded_is_the_one_the_card_shows(
        problem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kernelpilot PROBLEM`` starts the lookup in ``cli.prepare``, before the screen's modules are imported; the
    card shows that lookup's answer and never looks again (2026-12-06, H200: 1.51 s to the cached figures when the
    lookup waited for the card)."""
    from kernelpilot import cli
    from kernelpilot.evaluation.baselines import machine_cache
    from kernelpilot.tui.launch import app_for

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    table = BaselineTable(tmp_path / "cache" / "baselines.sqlite", wal=False)
    table.put(machine_key(problem.resolve(), EvalSettings(), current_identity(None)), str(problem),
              json.loads(BASELINES.read_text()), at=1_700_000_000.0)
    table.close()
    args = cli.build_parser().parse_args(["pair", str(problem)])
    cli.prepare(args)
    found = args.cached_baselines.result(timeout=30)
    assert found is not None and found.baselines.eager is not None and found.baselines.eager.median_ms == 0.957

    def looked_again(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the card looked the cached baselines up a second time")

    monkeypatch.setattr(machine_cache, "lookup", looked_again)
    factory = HeldStartup(problem, tmp_path / "wt")
    app = app_for(args, factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.card_facts is not None and app.card_facts.cached is not None,
                       what="the cached baselines")
        assert app.card_facts is not None and app.card_facts.cached is found and not factory.returned
        assert "eager     0.957 ms" in card(app) and "cached 2023-11-1" in card(app)
        factory.release.set()
        await wait_for(pilot, lambda: app.startup is not None, what="the session")
        await pilot.press("ctrl+q")
