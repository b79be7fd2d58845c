"""The first screen's problem card and its workers (an app mixin).

At mount, before the session is set up (``open_card``, from the launcher's ``CardPreview``): the card from
the problem file alone; a thread worker reads its shapes, bytes and FLOPs from this machine's cache (else
analyses them on the meta device in a process of its own, problem_facts.py: this process never imports
torch) and looks up this GPU's cached ceilings; another looks up this problem's baselines from an earlier
session on this machine (machine_cache.py: milliseconds, no torch), shown at once and labelled with their
date. Once the session is set up (``start_problem_card``) the card learns the GPU and the file to edit, and
a third worker asks the evaluation worker for this session's baselines (eager and torch.compile times), on
the engine thread, which replace them. All answer with messages; the UI thread only renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from kernelpilot import problem_facts
from kernelpilot.dropin.provenance import apply_command, origin_line
from kernelpilot.tui.messages import BaselinesMeasured, CachedBaselinesFound, CeilingsFound, ProblemAnalysed
from kernelpilot.tui.problem_card import CardFacts, ProblemCard
from kernelpilot.tui.startup import CardPreview

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


def _lookup_cached(path: Path, settings: Callable[[], Any], gpu: int | None) -> Any:
    """This problem's baselines in the machine's cache (machine_cache.py: milliseconds, no torch)."""
    from kernelpilot.evaluation.baselines.machine_cache import lookup

    return lookup(path, settings(), gpu)


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
    _cached_asked: bool = False  # the machine's cached baselines were looked up (once a session)
    baselines_owed: bool = False  # this session's baselines gave way to a save: measured after its verdict

    async def open_card(self, preview: CardPreview) -> None:
        """The card at once, from the problem file alone (before the session's worktree, engine and GPU are
        set up); its facts and the machine's cached baselines follow from workers, from caches first."""
        path = preview.path
        name = path.parent.name if path.stem == "problem" else path.stem  # examples/softmax/problem.py: softmax
        self.card_facts = CardFacts(name=name, file=path.name, gpu=None, manual=preview.manual,
                                    keys={"edit_latest": self._keymap.get("edit_latest", "ctrl+o")},
                                    origin=origin_line(path), apply=apply_command(path))
        await self.conversation.mount_entry(ProblemCard(self.card_facts))
        self.run_worker(partial(self._analyse_problem, path), thread=True, group="card", name="problem",
                        exit_on_error=False)
        if preview.cached is not None:  # the launcher's lookup, started before the screen's modules loaded
            self._ask_cached(preview.cached.result)
        elif preview.settings is not None:
            self._ask_cached(partial(_lookup_cached, path, preview.settings, None))

    async def start_problem_card(self, s: Startup) -> None:
        """The session is set up: the card learns the GPU and the file to edit, and this session's baselines
        are measured (the card was opened before, by ``open_card``, or is opened now)."""
        if s.problem is None:
            return
        path = Path(s.problem.path)
        if self.card_facts is None:
            await self.open_card(CardPreview(path, manual=s.manual))
        facts = self.card_facts
        assert facts is not None
        facts.edit_file, facts.edit_dir = edit_target(s)
        facts.gpu, facts.manual = s.gpu, s.manual
        if not s.gpu:
            facts.ceilings = None
        self._refresh_cards()
        if s.gpu and callable(getattr(s.evaluator, "baselines", None)):
            settings = getattr(s.evaluator, "settings", None)
            if settings is not None:  # what the machine's cache is keyed on
                self._ask_cached(partial(_lookup_cached, path, lambda: settings, getattr(s.evaluator, "gpu", None)))
            self.busy.start("baselines", "timing eager and torch.compile")
            self.run_worker(partial(self._measure_baselines, s), thread=True, group="card", name="baselines",
                            exit_on_error=False)

    def _ask_cached(self, get: Callable[[], Any]) -> None:
        """The machine's cached baselines from ``get`` (a lookup, or the answer of the one the launcher started),
        on a thread worker, once a session."""
        if self._cached_asked:
            return
        self._cached_asked = True
        self.run_worker(partial(self._cached_from, get), thread=True, group="card", name="cached",
                        exit_on_error=False)

    async def show_problem_card(self) -> bool:
        """``/problem``: the card again, at the bottom of the conversation (False when there is none)."""
        if self.card_facts is None:
            return False
        await self.conversation.mount_entry(ProblemCard(self.card_facts))
        return True

    # ---- thread workers ----------------------------------------------------------------------
    def _analyse_problem(self, path: Path) -> None:
        """The card's facts: from this machine's cache at once when this problem file was analysed before
        (problem_facts.py, no torch), else from the analysis on the meta device in a process of its own (this
        one never imports torch), which fills the cache; then this GPU's cached ceilings, if any."""
        info, error = problem_facts.analyse_apart(path)
        self.post_message(ProblemAnalysed(info, error=error))
        if info is not None:
            ceilings = cached_ceilings()
            if ceilings:
                self.post_message(CeilingsFound(ceilings))

    def _cached_from(self, get: Callable[[], Any]) -> None:
        """Post what ``get`` found, or why it failed."""
        from kernelpilot.evaluation.baselines.machine_cache import CacheUnavailable

        try:
            found = get()
        except CacheUnavailable as err:
            self.post_message(CachedBaselinesFound(error=str(err)))
            return
        except Exception as err:  # the card goes on without them, whatever the cache did
            self.post_message(CachedBaselinesFound(error=f"the machine's cached baselines were not read: {err}"))
            return
        if found is not None:
            self.post_message(CachedBaselinesFound(found))

    def _measure_baselines(self, s: Startup) -> None:
        """This session's baselines, on the engine thread; a save made meanwhile goes first (the engineer waits for
        its verdict, not for the card): once it can be evaluated (pairing.py: the launch's build done) they are
        deferred (Evaluator.defer_baselines), and measured again after its verdict (edits.py)."""
        from kernelpilot.errors import BaselinesDeferred

        # the worktree too: the worker started here then evaluates the first edit, warm
        readable = [s.worktree] if s.worktree is not None and s.worktree.is_dir() else None

        def measure() -> Any:  # on the engine thread: owed before the save's evaluation there can even begin
            try:
                return s.evaluator.baselines(Path(s.problem.path), readable=readable, deferrable=True)
            except BaselinesDeferred:
                self.baselines_owed = True
                raise

        try:
            baselines = s.call_engine(measure)
        except BaselinesDeferred:
            self.post_message(BaselinesMeasured(deferred=True))
            return
        except Exception as err:
            self.post_message(BaselinesMeasured(error=str(err).removeprefix("the baselines were not measured: ")))
            return
        self.post_message(BaselinesMeasured(baselines))
        check = getattr(s.evaluator, "check_compiled", None)
        if callable(check):  # torch.compile's own check, which the card's times did not wait for; a save goes first
            try:
                s.call_engine(lambda: check(Path(s.problem.path), readable=readable))
            except Exception:  # noqa: BLE001 - deferred or failed: the first benchmark verdict makes it itself
                pass

    # ---- messages ----------------------------------------------------------------------------
    def on_problem_analysed(self, message: ProblemAnalysed) -> None:
        facts = self.card_facts
        if facts is None or self.closing:
            return
        facts.info, facts.info_error = message.info, message.error
        if message.ceilings and not facts.ceilings:
            facts.ceilings = message.ceilings
        self._refresh_cards()

    def on_ceilings_found(self, message: CeilingsFound) -> None:
        facts = self.card_facts
        if facts is None or self.closing or facts.gpu is False or facts.ceilings:
            return
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
        facts.baselines_deferred = message.deferred
        if message.deferred:  # the save's evaluation, then them again (EngineerEdits._baselines_after)
            self._refresh_cards()
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
