"""The first screen's problem card and its workers (an app mixin).

On start: a thread worker analyses the problem (shapes, bytes, FLOPs on the meta device) and looks
up this GPU's cached ceilings; another looks up this problem's baselines from an earlier session on this
machine (machine_baselines.py: milliseconds, no torch), shown at once and labelled with their date; a
third asks the evaluation worker for this session's baselines (eager and torch.compile times), on the
engine thread, which replace them. All answer with messages; the UI thread only renders.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from kernelpilot import problem_facts
from kernelpilot.tui.messages import BaselinesMeasured, CachedBaselinesFound, ProblemAnalysed
from kernelpilot.dropin.provenance import apply_command, origin_line
from kernelpilot.problem import analyse
from kernelpilot.tui.problem_card import CardFacts, ProblemCard

if TYPE_CHECKING:
    from kernelpilot.tui.startup import Startup


def cached_ceilings() -> dict[str, Any] | None:
    """This GPU's measured ceilings from the engine's cache, identified through NVML (no CUDA here)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            name, driver = pynvml.nvmlDeviceGetName(handle), pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML, no GPU: the baselines bring the ceilings, or there are none
        return None
    import platformdirs

    from kernelpilot.evaluation.timing import ceilings

    name, driver = (v.decode() if isinstance(v, bytes) else str(v) for v in (name, driver))
    found = ceilings.load_cached(name, driver, Path(platformdirs.user_cache_dir("kernelpilot")) / "ceilings")
    return asdict(found) if found is not None else None


def edit_target(s: Startup) -> tuple[str, str]:
    """(the file to edit, the candidate directory), both absolute: the session's copies in its worktree,
    the ones that are watched (the engineer's checkout is not). The file: the first ``.cu``, else the first
    candidate source; "" while the directory has none."""
    watch = s.watch_dir
    if watch is None:
        return "", ""
    watch = Path(watch).absolute()
    files = sorted(p for p in watch.iterdir() if p.suffix in (".cu", ".cuh", ".cpp", ".py")) if watch.is_dir() else []
    first = next((p for p in files if p.suffix == ".cu"), files[0] if files else None)
    return (str(first) if first else ""), str(watch)


class ProblemCardView:
    """Mixed into KernelpilotApp."""

    startup: Startup | None
    card_facts: CardFacts | None
    conversation: Any
    busy: Any
    run_worker: Any
    post_message: Any
    query: Any
    log: Any
    closing: bool
    _keymap: dict[str, str]

    async def start_problem_card(self, s: Startup) -> None:
        if s.problem is None:
            return
        file, folder = edit_target(s)
        path = Path(s.problem.path)
        name = path.parent.name if path.stem == "problem" else path.stem  # examples/softmax/problem.py: softmax
        self.card_facts = CardFacts(name=name, file=path.name, gpu=s.gpu,
                                    edit_file=file, edit_dir=folder, manual=s.manual,
                                    keys={"edit_latest": self._keymap.get("edit_latest", "ctrl+o")},
                                    origin=origin_line(path), apply=apply_command(path))
        await self.conversation.mount_entry(ProblemCard(self.card_facts))
        self.run_worker(partial(self._analyse_problem, s), thread=True, group="card", name="problem",
                        exit_on_error=False)
        if s.gpu and callable(getattr(s.evaluator, "baselines", None)):
            if getattr(s.evaluator, "settings", None) is not None:  # what the machine's cache is keyed on
                self.run_worker(partial(self._cached_baselines, s), thread=True, group="card", name="cached",
                                exit_on_error=False)
            self.busy.start("baselines", "timing eager and torch.compile")
            self.run_worker(partial(self._measure_baselines, s), thread=True, group="card", name="baselines",
                            exit_on_error=False)

    async def show_problem_card(self) -> bool:
        """``/problem``: the card again, at the bottom of the conversation (False when there is none)."""
        if self.card_facts is None:
            return False
        await self.conversation.mount_entry(ProblemCard(self.card_facts))
        return True

    # ---- thread workers ----------------------------------------------------------------------
    def _analyse_problem(self, s: Startup) -> None:
        """The card's facts: from this machine's cache at once when this problem file was analysed before
        (problem_facts.py, no torch), else from the analysis on the meta device, which then fills the cache."""
        path = Path(s.problem.path)
        known = problem_facts.lookup(path)
        if known is not None:
            self.post_message(ProblemAnalysed(known, cached_ceilings() if s.gpu else None))
            return
        try:
            info = analyse(s.problem, device="meta")
        except Exception as err:  # a problem the engine will also refuse: say why on the card
            self.post_message(ProblemAnalysed(error=str(err).splitlines()[0] if str(err) else type(err).__name__))
            return
        problem_facts.store(path, info)
        self.post_message(ProblemAnalysed(info, cached_ceilings() if s.gpu else None))

    def _cached_baselines(self, s: Startup) -> None:
        from kernelpilot.evaluation.baselines.machine_cache import CacheUnavailable, lookup

        try:
            found = lookup(Path(s.problem.path), s.evaluator.settings, getattr(s.evaluator, "gpu", None))
        except CacheUnavailable as err:
            self.post_message(CachedBaselinesFound(error=str(err)))
            return
        except Exception as err:  # the card goes on without them, whatever the cache did
            self.post_message(CachedBaselinesFound(error=f"the machine's cached baselines were not read: {err}"))
            return
        if found is not None:
            self.post_message(CachedBaselinesFound(found))

    def _measure_baselines(self, s: Startup) -> None:
        try:
            # the worktree too: the worker started here then evaluates the first edit, warm
            readable = [s.worktree] if s.worktree is not None and s.worktree.is_dir() else None
            baselines = s.call_engine(s.evaluator.baselines, Path(s.problem.path), readable=readable)
        except Exception as err:
            self.post_message(BaselinesMeasured(error=str(err).removeprefix("the baselines were not measured: ")))
            return
        self.post_message(BaselinesMeasured(baselines))

    # ---- messages ----------------------------------------------------------------------------
    def on_problem_analysed(self, message: ProblemAnalysed) -> None:
        facts = self.card_facts
        if facts is None or self.closing:
            return
        facts.info, facts.info_error = message.info, message.error
        if message.ceilings and not facts.ceilings:
            facts.ceilings = message.ceilings
        self._refresh_cards()

    async def on_cached_baselines_found(self, message: CachedBaselinesFound) -> None:
        facts = self.card_facts
        if facts is None or self.closing:
            return
        if message.error:  # the card shows this session's baselines when they come, nothing else changes
            self.log.warning(message.error)
            await self.conversation.note(Text(f"{message.error}; the card shows this session's baselines only"),
                                         "warning")
            return
        facts.cached = message.cached
        if not facts.ceilings and message.cached.baselines.ceilings:
            facts.ceilings = message.cached.baselines.ceilings
        self._refresh_cards()

    def on_baselines_measured(self, message: BaselinesMeasured) -> None:
        self.busy.stop("baselines")
        facts = self.card_facts
        if facts is None or self.closing:
            return
        facts.baselines, facts.baselines_error = message.baselines, message.error
        if message.baselines is not None and message.baselines.ceilings:
            facts.ceilings = message.baselines.ceilings
        self._refresh_cards()

    def card_below(self, widget: Any) -> None:
        """Keep the first card under the session's opening line, the last thing on the first screen."""
        cards = list(self.query(ProblemCard))
        if cards and cards[0].parent is widget.parent:
            self.conversation.move_child(cards[0], after=widget)

    def _refresh_cards(self) -> None:
        for card in self.query(ProblemCard):
            card.refresh_facts()
