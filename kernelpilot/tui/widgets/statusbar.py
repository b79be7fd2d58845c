"""The status bar (model, replay, cost and tokens, budgets, GPU) and the busy line (spinner)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Label, Static

from kernelpilot.tui.gpu import GpuReading

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class StatusBar(Horizontal):
    def compose(self) -> ComposeResult:
        yield Label("starting…", id="sb-model")
        yield Label("", id="sb-replay")
        yield Label("", id="sb-usage")
        yield Label("", id="sb-budget")
        yield Label("", id="sb-gpu")

    def set_model(self, model: str, replay: bool = False) -> None:
        self.query_one("#sb-model", Label).update(f"model: {model}" if model else "manual (no model)")
        replay_label = self.query_one("#sb-replay", Label)
        replay_label.update(" REPLAY " if replay else "")
        replay_label.display = replay

    def set_usage(self, tokens: int, cost: float) -> None:
        self.query_one("#sb-usage", Label).update(f"{tokens:,} tok · ${cost:.2f}")

    def set_budget(self, text: str) -> None:
        self.query_one("#sb-budget", Label).update(text)

    def set_gpu(self, reading: GpuReading | None) -> None:
        self.query_one("#sb-gpu", Label).update(reading.describe() if reading else "no GPU")


class BusyLine(Static):
    """A spinner with elapsed time for every long step in progress; hidden when idle."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, **kw: Any) -> None:
        super().__init__("", **kw)
        self._clock = clock
        self._tasks: dict[str, tuple[str, float]] = {}
        self._frame = 0
        self._timer: Timer | None = None

    def on_mount(self) -> None:
        self.display = False

    def start(self, key: str, label: str) -> None:
        self._tasks[key] = (label, self._clock())
        self.display = True
        if self._timer is None:
            self._timer = self.set_interval(0.1, self._tick)
        self._tick()

    def stop(self, key: str) -> None:
        self._tasks.pop(key, None)
        if not self._tasks:
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            self.display = False
            self.update("")
        else:
            self._tick()

    @property
    def keys(self) -> list[str]:
        return list(self._tasks)

    @property
    def active(self) -> list[str]:
        return [label for label, _ in self._tasks.values()]

    def _tick(self) -> None:
        if not self._tasks:
            return
        now = self._clock()
        self._frame = int(now * 10) % len(SPINNER)  # from the clock: a frozen clock gives a still frame
        parts = [f"{label} {now - started:.0f}s" for label, started in self._tasks.values()]
        self.update(f"{SPINNER[self._frame]} " + " · ".join(parts))
