"""The engineer's own edits: the watcher loop, evaluation workers, and telling the agent (app mixin)."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.worker import get_current_worker

from kernelpilot.agent import events as ev
from kernelpilot.tui.diffview import diff_summary
from kernelpilot.tui.messages import AgentEvent, EditEvaluated, FilesEdited
from kernelpilot.tui.pairing import CandidateWatcher, WorkspaceEditEvaluator, edit_message
from kernelpilot.tui.verdict_view import verdict_of

SETTLE_S = 0.02  # how long a changed file must stay the same before its save is evaluated

if TYPE_CHECKING:
    from kernelpilot.tui.session import SessionRunner
    from kernelpilot.tui.startup import Startup


class EngineerEdits:
    """Mixed into KernelpilotApp."""

    startup: Startup | None
    runner: SessionRunner | None
    watcher: CandidateWatcher | None
    done_reason: str
    busy: Any
    _stopping: threading.Event
    _eval_lock: threading.Lock
    _eval_count: int
    _watch_interval: float
    _tool_args: dict[str, dict[str, Any]]
    run_worker: Any
    post_message: Any
    send_to_agent: Any
    show_event: Any
    baselines_owed: bool
    _measure_baselines: Any

    def _from_session(self, event: ev.Event) -> None:
        """On the session's thread, before the loop takes its next step: keep the agent's own file
        writes out of the edit watcher (synchronously, so no poll can fall in between)."""
        if self.watcher is not None:
            if isinstance(event, ev.ToolCallStarted):
                self._tool_args[event.call_id] = event.arguments
                self.watcher.pause()
            elif isinstance(event, ev.ToolCallFinished):
                self._resume_watcher(event.name, self._tool_args.pop(event.call_id, {}))
        self.post_message(AgentEvent(event))

    def _watch_loop(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled and not self._stopping.is_set() and self.watcher is not None:
            changed = self.watcher.poll()
            if changed:
                self.post_message(FilesEdited(changed))
            # a save just seen is confirmed stable SETTLE_S later, not a whole interval (0.1 s of every verdict)
            watcher = self.watcher
            self._stopping.wait(min(SETTLE_S, self._watch_interval) if watcher is not None and watcher.settling
                                else self._watch_interval)

    # ---- the engineer's edits --------------------------------------------------------------
    def on_files_edited(self, message: FilesEdited) -> None:
        self._eval_count += 1
        number = self._eval_count
        name = f"evaluate-{number}"
        files = ", ".join(p.name for p in message.paths)
        self.busy.start(name, f"evaluating your edit ({files})")
        evaluator = self.startup.edit_evaluator if self.startup else None
        if hasattr(evaluator, "evaluate_edit_async") and self.runner is not None:
            self.run_worker(self._evaluate_edit_async(message.paths), group="evaluate", name=name,
                            exit_on_error=False)
        else:
            # a newer save supersedes the evaluation in flight (its build or worker request is stopped)
            if callable(getattr(evaluator, "cancel", None)):
                self.run_worker(evaluator.cancel, thread=True, group="cancel", name=f"cancel-{number}",
                                exit_on_error=False)
            self.run_worker(partial(self._evaluate_edit, message.paths, number), thread=True, group="evaluate",
                            name=name, exit_on_error=False)

    async def _evaluate_edit_async(self, paths: list[Path]) -> None:
        assert self.startup is not None and self.runner is not None
        evaluator: Any = self.startup.edit_evaluator
        event = await self.runner.submit(evaluator.evaluate_edit_async, paths)
        self.post_message(EditEvaluated(event, paths))

    def _evaluate_edit(self, paths: list[Path], number: int = 0) -> None:
        assert self.startup is not None and self.startup.edit_evaluator is not None
        evaluator: Any = self.startup.edit_evaluator
        with self._eval_lock:  # one evaluation at a time, in the order of the saves
            skip = getattr(evaluator, "superseded_edit", None)
            if number and number < self._eval_count and callable(skip):
                event = skip(paths)  # a newer save came before this one started: recorded, not evaluated
            elif isinstance(evaluator, WorkspaceEditEvaluator):  # the test's verdict drawn before the benchmark's
                event = evaluator.evaluate_edit(
                    paths, on_first=lambda first: self.post_message(EditEvaluated(first, paths)))
            else:
                event = evaluator.evaluate_edit(paths)
        self.post_message(EditEvaluated(event, paths))
        self._baselines_after(number)

    def _baselines_after(self, number: int) -> None:
        """This session's baselines, when a save went first (orient.py), once the latest save's verdict is in."""
        s = self.startup
        if not self.baselines_owed or s is None or (number and number < self._eval_count):
            return  # a newer save is on its way: after its verdict
        self.baselines_owed = False
        self._measure_baselines(s)

    async def on_edit_evaluated(self, message: EditEvaluated) -> None:
        await self.show_event(message.event)
        s = self.startup
        if s is None or s.manual or self.runner is None or self.done_reason:
            return
        if (message.event.verdict or {}).get("status") == "superseded":
            return  # the agent hears about the newer save's verdict
        v = verdict_of(message.event.verdict)
        text = edit_message(message.paths, s.worktree or Path("."), diff_summary(message.event.diff),
                            v.summary or v.status)
        await self.send_to_agent(text, echo=False)

    def _resume_watcher(self, tool: str, arguments: dict[str, Any]) -> None:
        """After an agent tool call: what it wrote is the agent's, not an edit of the engineer's."""
        assert self.watcher is not None
        root = self.startup.worktree if self.startup and self.startup.worktree else Path(".")
        path = arguments.get("path")
        if tool in ("write_file", "edit_file") and isinstance(path, str):
            self.watcher.resume(accept=[(root / path).resolve(), root / path])
        else:
            self.watcher.resume(accept_all=tool in ("revert", "restore"))

