"""The problem card: what the problem is, what it costs today on this GPU, and where to start.

Drawn at once from the problem file, then filled in as its facts arrive, each from a worker (never on the UI
thread): the problem's shapes, dtypes, bytes and FLOPs (this machine's cache, else ``problem.analyse`` on the
meta device in a process of its own), the GPU's measured ceilings (the
engine's cache, or with the baselines), then eager and torch.compile times: at once those measured in
an earlier session on this machine, if any (``cached``, labelled with their date), replaced by this
session's (``Evaluator.baselines`` in the evaluation worker). Without a GPU the card says what needs one.
``/problem`` shows it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

MAX_INPUT_LINES = 4


@dataclass
class CardFacts:
    name: str = ""
    file: str = ""
    info: Any = None  # problem.ProblemInfo
    info_error: str = ""
    ceilings: dict[str, Any] | None = None  # ceilings.Ceilings as a dict (cached, or from the baselines)
    gpu: bool | None = True  # a GPU is visible: baselines and timed verdicts are possible (None: not known yet)
    baselines: Any = None  # evaluation.baselines.Baselines, measured in this session
    baselines_error: str = ""
    baselines_deferred: bool = False  # a save went first: they are timed after its verdict
    cached: Any = None  # machine_baselines.CachedBaselines: an earlier session's, shown until ``baselines`` come
    edit_file: str = ""  # the file to edit, absolute: the worktree's watched copy (what the edit key opens)
    edit_dir: str = ""  # the candidate directory, absolute, in the worktree
    keys: dict[str, str] = field(default_factory=dict)  # action -> key, e.g. {"edit_latest": "ctrl+o"}
    manual: bool = True
    origin: str = ""  # an extracted problem: where in the script's model it came from
    apply: str = ""  # and the command that applies an approved kernel of it


def size(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} B"


def flops_text(flops: int | None) -> str:
    if not flops:
        return "no FLOPs counted"
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.2f} {unit}"
    return f"{flops} FLOP"


def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.1f} µs" if value < 0.1 else f"{value:.3f} ms"


def _shape(spec: Any) -> str:
    return "×".join(str(d) for d in spec.shape) or "scalar"


def floor(facts: CardFacts) -> tuple[float | None, str, str]:
    """(floor ms, bound, the ceiling it was taken at) from the baselines (this session's, else an earlier
    one's on this machine), else the cached ceilings."""
    b = facts.baselines if facts.baselines is not None else (facts.cached.baselines if facts.cached else None)
    if b is not None and b.speed_of_light is not None and b.speed_of_light.floor_ms:
        sol = b.speed_of_light
        at = f"{sol.ceiling_tbps:.2f} TB/s" if sol.bound == "memory" and sol.ceiling_tbps else (
            f"{sol.ceiling_tflops:.0f} TFLOP/s" if sol.ceiling_tflops else "")
        return sol.floor_ms, sol.bound, at
    info, ceil = facts.info, facts.ceilings
    if info is None or not ceil:
        return None, "unknown", ""
    from kernelpilot.evaluation.timing.speed_of_light import roofline  # pure Python, but not at import time

    rates = ceil.get("tflops") or {}
    tflops = rates.get(info.primary_dtype) or (rates.get("bfloat16") if info.primary_dtype == "float16" else None)
    floor_ms, bound = roofline(info.bytes_moved, info.flops, ceil.get("copy_tbps"), tflops)
    at = f"{ceil['copy_tbps']:.2f} TB/s" if bound == "memory" and ceil.get("copy_tbps") else (
        f"{tflops:.0f} TFLOP/s" if tflops else "")
    return floor_ms, bound, at


def card_lines(facts: CardFacts) -> list[tuple[str, str]]:
    """(label, text) rows of the card, short enough for an 80-column terminal."""
    rows: list[tuple[str, str]] = [("from", facts.origin)] if facts.origin else []
    info = facts.info
    if info is None:
        rows.append(("problem", f"could not be analysed: {facts.info_error}" if facts.info_error
                     else "analysing shapes, bytes and FLOPs…"))
    else:
        for i, spec in enumerate(info.inputs[:MAX_INPUT_LINES]):
            rows.append(("input" if i == 0 else "", f"{_shape(spec)} {spec.dtype} ({size(spec.nbytes)})"))
        if len(info.inputs) > MAX_INPUT_LINES:
            rows.append(("", f"+{len(info.inputs) - MAX_INPUT_LINES} more inputs"))
        if info.parameter_bytes:
            rows.append(("weights", f"{info.parameter_count:,} parameters ({size(info.parameter_bytes)})"))
        for i, spec in enumerate(info.outputs[:2]):
            rows.append(("output" if i == 0 else "", f"{_shape(spec)} {spec.dtype} ({size(spec.nbytes)})"))
        rows.append(("moves", f"{size(info.bytes_moved)} at least · {flops_text(info.flops)}"))
    floor_ms, bound, at = floor(facts)
    if floor_ms is not None:
        source = f" (measured on {facts.ceilings['gpu']})" if facts.ceilings and facts.ceilings.get("gpu") else ""
        rows.append(("floor", f"{ms(floor_ms)}, {bound}-bound at {at}{source}"))
    elif info is not None and facts.gpu is False:
        rows.append(("floor", "needs this GPU's measured ceilings: no GPU is visible"))
    elif info is not None:
        rows.append(("floor", "with the GPU's measured ceilings…"))
    rows += _baseline_rows(facts, floor_ms)
    rows += _start_rows(facts)
    if facts.apply:
        rows.append(("apply", f"once approved: {facts.apply}"))
    return rows


def _baseline_rows(facts: CardFacts, floor_ms: float | None) -> list[tuple[str, str]]:
    if facts.gpu is False:
        return [("baselines", "eager and torch.compile times need a GPU; none is visible"),
                ("", "so saves get build-only verdicts (registers, spills)")]
    b, cached = facts.baselines, facts.cached
    if b is not None:
        return _timed_rows(b, floor_ms)
    rows = [("baselines", f"not measured: {facts.baselines_error}")] if facts.baselines_error else []
    if cached is None and facts.gpu is None:  # the session (its GPU, its engine) is still being set up
        return rows or [("baselines", "eager and torch.compile: starting the session…")]
    waiting = "timed after your save's verdict (it went first)" if facts.baselines_deferred else "timing them again"
    if cached is None:
        return rows or [("baselines", f"eager and torch.compile: {waiting}…" if facts.baselines_deferred
                         else "timing eager and torch.compile on the GPU…")]
    label = f" · cached {cached.date()}"  # an earlier session's, on this machine: never a verdict's ratio
    rows += [(name, text + label) for name, text in _timed_rows(cached.baselines, floor_ms)[:2]]
    if not facts.baselines_error and facts.gpu:
        rows.append(("", f"{waiting} in this session…"))
    return rows


def _timed_rows(b: Any, floor_ms: float | None) -> list[tuple[str, str]]:
    def timed(t: Any) -> str:
        if t is None:
            return "not measured"
        share = f" ({100 * floor_ms / t.median_ms:.0f}% of speed of light)" if floor_ms and t.median_ms > 0 else ""
        return f"{ms(t.median_ms)}{share}"

    rows = [("eager", timed(b.eager)), ("compile", timed(b.compiled) + ("" if b.compile_mode == "default"
                                                                          else f" [{b.compile_mode}]"))]
    for note in b.notes[:1]:
        rows.append(("", note[:160]))
    return rows


def _start_rows(facts: CardFacts) -> list[tuple[str, str]]:
    edit_key = facts.keys.get("edit_latest", "ctrl+o")
    watched = ("", "(the session's copy in its worktree: saves to your checkout's copy are not evaluated)")
    if not facts.manual:
        where = facts.edit_dir or "the candidate directory"
        opens = (f"{edit_key} opens {Path(facts.edit_file).name}" if facts.edit_file
                 else f"{edit_key} opens its first file")
        return [("start", f"tell the agent what to try; it writes {where}/"),
                ("", f"your own saves there are evaluated too ({opens})")]
    agent = ("agent", "none: restart with --model anthropic/claude-sonnet-4-5")
    if facts.edit_file:
        return [("edit", facts.edit_file), watched,
                ("", f"{edit_key} opens it in $EDITOR; every save is evaluated"), agent]
    where = facts.edit_dir or "the candidate directory"
    return [("edit", f"write model_new.py, binding.cpp and a .cu kernel in {where}/"), watched,
            ("", "every save there is evaluated"), agent]


def _title(facts: CardFacts) -> Text:
    text = Text(facts.name or "problem", style="bold")
    if facts.file:
        text.append(f"  {facts.file}", style="dim")
    return text


def card_text(facts: CardFacts) -> str:
    """The card as plain text, one row a line (for tests and logs)."""
    rows = [f"{label:<10}{value}" for label, value in card_lines(facts)]
    return "\n".join([_title(facts).plain, *rows])


def card_renderable(facts: CardFacts) -> Group:
    """The card on screen: labels in a column of their own, so wrapped values keep their indent."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold dim", width=9, no_wrap=True)
    grid.add_column(ratio=1, overflow="fold")  # a long path is folded over lines, never cut short
    for label, value in card_lines(facts):
        grid.add_row(label, value)
    return Group(_title(facts), grid)


class ProblemCard(Static):
    """The card in the conversation; ``refresh_facts`` re-renders it from the shared facts."""

    def __init__(self, facts: CardFacts, **kw: Any) -> None:
        super().__init__(card_renderable(facts), classes="problem-card", **kw)
        self.facts = facts

    @property
    def plain(self) -> str:
        return card_text(self.facts)

    def refresh_facts(self) -> None:
        self.update(card_renderable(self.facts))
