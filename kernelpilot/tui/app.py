"""The Textual pairing app: conversation, candidates, review, status; workers talk only by messages.

Key bindings have ids equal to their action names and can be remapped with ``keys`` in the project
config (``[keys]`` table, action = "key"): main screen ``quit``, ``review``, ``candidates``,
``edit_latest``, ``help``; review screen ``approve``, ``reject``, ``edit``, ``toggle_diff``, ``back``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState, get_current_worker

from kernelpilot.tui.actions import ReviewActions
from kernelpilot.tui.commands import BY_NAME, SlashCommandProvider
from kernelpilot.tui.edits import EngineerEdits
from kernelpilot.tui.eventview import EventView
from kernelpilot.tui.gpu import GpuSource, NvmlGpuSource
from kernelpilot.tui.layout import ResponsiveLayout
from kernelpilot.tui.messages import AgentEvent, GpuUpdated, ResumeOffered, StartupReady
from kernelpilot.tui.orient import ProblemCardView
from kernelpilot.tui.pairing import CandidateWatcher
from kernelpilot.tui.problem_card import CardFacts
from kernelpilot.tui.review import ConfirmModal
from kernelpilot.tui.session import SessionRunner
from kernelpilot.tui.slash import run_slash
from kernelpilot.tui.startup import MODEL_HELP, CardPreview, ResumeFinder, Startup, StartupFactory
from kernelpilot.tui.widgets.candidates import CandidatesPanel
from kernelpilot.tui.widgets.conversation import ConversationPane
from kernelpilot.tui.widgets.statusbar import BusyLine, StatusBar


class KernelpilotApp(EventView, EngineerEdits, ReviewActions, ProblemCardView, ResponsiveLayout, App[int]):
    CSS_PATH = "kernelpilot.tcss"
    TITLE = "kernelpilot"
    COMMANDS = App.COMMANDS | {SlashCommandProvider}
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding("ctrl+r", "review_latest", "Review", id="review"),
        Binding("ctrl+t", "focus_table", "Candidates", id="candidates"),
        Binding("ctrl+o", "edit_latest", "Edit", id="edit_latest"),
        Binding("f1", "help", "Help", id="help"),
    ]

    def __init__(
        self,
        startup: Startup | StartupFactory,
        *,
        resume_finder: ResumeFinder | None = None,
        gpu_source: GpuSource | None = None,
        gpu_interval: float = 2.0,
        watch_interval: float = 0.1,
        keys: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        preview: CardPreview | None = None,
    ) -> None:
        """``preview``: the problem card's sources known before the session is set up (the launcher's); the card
        is then drawn at mount, from caches, without waiting for the worktree, the engine or the GPU."""
        super().__init__()
        self._preview = preview
        self._factory: StartupFactory = startup if callable(startup) else (lambda _resume: startup)
        self._resume_finder = resume_finder
        self._gpu: GpuSource = gpu_source if gpu_source is not None else NvmlGpuSource()
        self._gpu_interval = gpu_interval
        self._watch_interval = watch_interval
        self._keys = dict(keys or {})
        self._clock = clock
        self._stopping = threading.Event()
        self._eval_lock = threading.Lock()
        self._eval_count = 0
        self._echoed: list[str] = []
        self._tool_args: dict[str, dict[str, Any]] = {}
        self._quitting = False
        self._evaluator_closed = False
        self.startup: Startup | None = None
        self.runner: SessionRunner | None = None
        self.watcher: CandidateWatcher | None = None
        self.tokens = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost = 0.0
        self.turns = 0
        self.started_at = clock()
        self.latest: str | None = None
        self.errors: list[str] = []
        self.done_reason = ""
        self.card_facts: CardFacts | None = None

    # ---- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="banner")
        with Horizontal(id="main"):
            yield ConversationPane(id="conversation")
            yield CandidatesPanel(id="candidates")
        yield BusyLine(clock=self._clock, id="busy")
        yield Input(placeholder="Message the agent, or /help for commands", id="prompt", select_on_focus=False)
        yield StatusBar(id="status")
        yield Footer()

    @property
    def conversation(self) -> ConversationPane:
        return self.query_one(ConversationPane)

    @property
    def panel(self) -> CandidatesPanel:
        return self.query_one(CandidatesPanel)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def busy(self) -> BusyLine:
        return self.query_one(BusyLine)

    async def on_mount(self) -> None:
        if self._keys:
            self.set_keymap(self._keys)
        self.query_one("#banner").display = False
        self.apply_layout(self.size.width, self.size.height)
        self.query_one(Input).focus()
        self.busy.start("startup", "starting the session")
        if self._preview is not None:  # the card first: its facts come from caches, before the session is set up
            await self.open_card(self._preview)
        self.run_worker(self._gpu_loop, thread=True, group="gpu", name="gpu", exit_on_error=False)
        self.run_worker(self._find_resume_then_build, thread=True, group="startup", name="startup",
                        exit_on_error=False)

    # ---- startup (thread workers) ----------------------------------------------------------
    def _find_resume_then_build(self) -> None:
        offer = self._resume_finder() if self._resume_finder is not None else None
        if offer is not None:
            self.post_message(ResumeOffered(*offer))
            return
        self._build(None)

    def _build(self, resume_id: str | None) -> None:
        self.post_message(StartupReady(self._factory(resume_id)))

    def on_resume_offered(self, message: ResumeOffered) -> None:
        def answered(yes: bool | None) -> None:
            chosen = message.session_id if yes else None
            self.run_worker(partial(self._build, chosen), thread=True, group="startup", name="startup",
                            exit_on_error=False)

        self.push_screen(ConfirmModal(f"Resume {message.description}?"), answered)

    @property
    def typing(self) -> bool:
        """The engineer has a half-written message in the input box."""
        return bool(self.query_one("#prompt", Input).value.strip())

    @property
    def closing(self) -> bool:
        """True once the app is shutting down: late messages are dropped, not shown."""
        return self._closing or self._exit or not self.is_running

    async def on_startup_ready(self, message: StartupReady) -> None:
        if self.closing:
            self.startup = message.startup
            self._close_evaluator()
            return
        s = self.startup = message.startup
        self.busy.stop("startup")
        self.status.set_model(s.model, s.replay)
        self.refresh_budget()
        if s.manual:
            banner = self.query_one("#banner", Static)
            banner.update(s.banner())
            banner.display = True
        await self.start_problem_card(s)
        for line in s.notes:
            await self.conversation.note(line, "system")
        if s.watch_dir is not None and s.edit_evaluator is not None:
            self.watcher = CandidateWatcher(s.watch_dir)
            self.run_worker(self._watch_loop, thread=True, group="watch", name="watch", exit_on_error=False)
        self.runner = SessionRunner(s.session, self._from_session)
        self.run_worker(self.runner.run_blocking, thread=True, group="session", name="session",
                        exit_on_error=False)

    # ---- background loops (thread workers) -------------------------------------------------
    def _gpu_loop(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled and not self._stopping.is_set():
            self.post_message(GpuUpdated(self._gpu.read()))
            if self._gpu_interval <= 0:
                return
            self._stopping.wait(self._gpu_interval)

    def on_gpu_updated(self, message: GpuUpdated) -> None:
        if not self.closing:
            self.status.set_gpu(message.reading)

    # ---- events from the session -----------------------------------------------------------
    async def on_agent_event(self, message: AgentEvent) -> None:
        if self.closing:
            return
        try:
            await self.show_event(message.event)
        except Exception as err:  # a bad event must not take the app down
            await self.report_error(f"showing {message.event.kind}", err)

    # ---- review, approve, reject, edit -----------------------------------------------------
    def on_candidates_panel_selected(self, message: CandidatesPanel.Selected) -> None:
        rec = self.panel.records.get(message.candidate_id)
        if rec is not None:
            self.open_review(rec)

    def action_review_latest(self) -> None:
        if self.latest and self.latest in self.panel.records:
            self.open_review(self.panel.records[self.latest])
        else:
            self.notify("No candidate yet.")

    def action_edit_latest(self) -> None:
        """The edit key: exactly the file the problem card names (the worktree's watched copy)."""
        self.open_edit_target()

    # ---- input -----------------------------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        """Typed text always goes to the input box: a printable key pressed on the main screen while the
        table or the conversation has focus moves the focus there and is typed into it (so `/quit` and
        Enter typed over the table quit, instead of the Enter opening a review). Review screens and
        dialogs keep their own keys."""
        if (isinstance(event, events.Key) and not event.is_forwarded and event.is_printable and event.character
                and len(self.screen_stack) == 1 and not isinstance(self.focused, Input)
                and event.key not in self.screen.active_bindings):  # a key remapped to an action keeps it
            prompt = self.query_one("#prompt", Input)
            prompt.focus()
            prompt.insert_text_at_cursor(event.character)
            event.stop()
            return
        await super().on_event(event)

    @on(Input.Submitted, "#prompt")
    async def prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if text.startswith("/"):
            await run_slash(self, text)
            return
        await self.send_to_agent(text)

    async def send_to_agent(self, text: str, echo: bool = True) -> None:
        s = self.startup
        if s is None or self.runner is None:
            self.notify("The session is still starting.", severity="warning")
            return
        if s.manual:
            await self.conversation.note(f"No model is configured, so there is no agent to message; to pair "
                                         f"with one, restart with {MODEL_HELP}.", "warning")
            return
        if echo:
            await self.conversation.note(Text(f"you: {text}"), "engineer")
        self._echoed.append(text)
        try:
            await self.runner.call("send", text)
        except Exception as err:
            await self.report_error("send", err)

    def pick_command(self, name: str) -> None:
        """From the command palette: run it, or put it in the input when it needs an argument."""
        cmd = BY_NAME[name]
        prompt = self.query_one("#prompt", Input)
        if cmd.needs_arg:
            prompt.value = f"/{name} "
            prompt.cursor_position = len(prompt.value)
            prompt.focus()
        else:
            self.run_worker(run_slash(self, f"/{name}"), group="command", exit_on_error=False)

    def action_help(self) -> None:
        self.run_worker(run_slash(self, "/help"), group="command", exit_on_error=False)

    # ---- errors and quitting ---------------------------------------------------------------
    async def report_error(self, where: str, err: BaseException | str) -> None:
        """The one place errors from workers and calls end up: a notification and a log entry."""
        text = str(err) if isinstance(err, str) or str(err) else type(err).__name__
        self.errors.append(f"{where}: {text}")
        self.log.error(f"{where}: {text}")
        self.notify(text, title=f"Error in {where}", severity="error", timeout=8)
        await self.conversation.note(Text(f"error ({where}): {text}"), "error")

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group == "evaluate" and event.state in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                          WorkerState.CANCELLED):
            self.busy.stop(worker.name)
        if event.state == WorkerState.ERROR and worker.error is not None:
            if worker.group == "startup":
                self.busy.stop("startup")
            if worker.group == "watch" and self.watcher is not None:
                self.watcher = None
            await self.report_error(worker.name or worker.group, worker.error)

    def on_unmount(self) -> None:
        """However the app ends, no thread of ours outlives it."""
        self._stopping.set()
        if self.runner is not None:
            self.runner.stop_nowait()
        threading.Thread(target=self._close_evaluator, daemon=True).start()

    def _close_evaluator(self) -> None:
        evaluator = self.startup.edit_evaluator if self.startup else None
        if evaluator is not None and not self._evaluator_closed:
            self._evaluator_closed = True
            evaluator.close()
        engine = self.startup.engine if self.startup else None
        if engine is not None:
            engine.close()

    async def action_quit(self) -> None:
        if self._quitting:  # a second quit while stopping: leave now
            self.exit(0)
            return
        self._quitting = True
        self.busy.start("quit", "stopping the session")
        self._stopping.set()
        clean = True
        if self.runner is not None:
            clean = await self.runner.shutdown(timeout=15.0)
        await asyncio.to_thread(self._close_evaluator)
        self._gpu.close()
        self.exit(0 if clean else 1)
