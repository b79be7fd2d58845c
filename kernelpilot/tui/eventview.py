"""How each session Event shows on screen (a mixin of the app: conversation, table, status)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from kernelpilot.agent import events as ev
from kernelpilot.tui.review import ReviewScreen
from kernelpilot.tui.verdict_view import BUILD_ONLY_NOTE, build_only, build_summary
from kernelpilot.tui.widgets.candidates import CandidateRecord

if TYPE_CHECKING:
    from kernelpilot.tui.startup import Startup


class EventView:
    """Mixed into KernelpilotApp; every method runs on the UI thread."""

    startup: Startup | None
    turns: int
    tokens: int
    cost: float
    prompt_tokens: int
    completion_tokens: int
    latest: str | None
    done_reason: str
    _echoed: list[str]
    conversation: Any
    panel: Any
    status: Any
    busy: Any
    screen: Any
    typing: bool
    notify: Any
    report_error: Any
    push_screen: Any
    pop_screen: Any
    card_below: Any

    # the model is working (between the engineer's turn or a tool result and the next reply)
    THINKING_AFTER = (ev.SessionStarted, ev.ToolCallFinished, ev.EngineerMessage, ev.ProposalRejected)
    THINKING_UNTIL = (ev.TextDelta, ev.AssistantMessage, ev.ToolCallStarted, ev.ProposalReady, ev.Done,
                      ev.ErrorEvent, ev.BudgetReached)

    def _track_thinking(self, e: ev.Event) -> None:
        if self.startup is None or self.startup.manual:
            return
        if isinstance(e, self.THINKING_UNTIL):
            self.busy.stop("model")
        elif isinstance(e, self.THINKING_AFTER) and not self.done_reason:
            finished = f"tool-{e.call_id}" if isinstance(e, ev.ToolCallFinished) else ""
            if not any(key.startswith("tool-") and key != finished for key in self.busy.keys):
                self.busy.start("model", "waiting for the model")

    async def show_event(self, e: ev.Event) -> None:  # noqa: C901 - one branch per event type
        conv = self.conversation
        self._track_thinking(e)
        if isinstance(e, ev.SessionStarted):
            manual = self.startup is not None and self.startup.manual
            self.status.set_model("" if manual else e.model, e.replay or bool(self.startup and self.startup.replay))
            where = f" in {e.worktree}" if e.worktree else ""
            self.card_below(await conv.note(f"Session {e.session_id} on {e.problem}{where}", "system"))
        elif isinstance(e, ev.TextDelta):
            await conv.append_delta(e.text)
        elif isinstance(e, ev.AssistantMessage):
            await conv.end_message(e.text)
            self.turns = max(self.turns, e.turn)
            self.refresh_budget()
        elif isinstance(e, ev.ToolCallStarted):
            await conv.tool_started(e.call_id, e.name, e.arguments)
            self.busy.start(f"tool-{e.call_id}", e.name)
        elif isinstance(e, ev.ToolCallFinished):
            await conv.tool_finished(e.call_id, e.name, e.result, e.ok, e.seconds)
            self.busy.stop(f"tool-{e.call_id}")
        elif isinstance(e, ev.CandidateEvaluated):
            rec = self.panel.upsert(e.candidate_id, e.verdict, diff=e.diff, commit=e.commit, source=e.source)
            self.latest = e.candidate_id
            who = "your edit" if e.source == "engineer" else "candidate"
            v = rec.verdict
            if build_only(v):
                await conv.note(f"{who} {e.candidate_id}: {build_summary(v)} — {BUILD_ONLY_NOTE}", "candidate")
            else:
                await conv.note(f"{who} {e.candidate_id}: {v.summary or v.status}", "candidate")
        elif isinstance(e, ev.ProposalReady):
            rec = self.panel.upsert(e.candidate_id, e.verdict, diff=e.diff, summary=e.summary)
            self.panel.set_state(e.candidate_id, "proposed")
            self.latest = e.candidate_id
            await conv.note(f"Proposal {e.candidate_id}: {e.summary} — review it (a approve, r reject)",
                            "proposal")
            if self.typing:  # never pop a screen whose keys (a/r) would catch the engineer's typing
                self.notify(f"Proposal {e.candidate_id} is ready: ctrl+r to review it.", title="Proposal")
            else:
                self.open_review(rec)
        elif isinstance(e, ev.ProposalApproved):
            self.panel.set_state(e.candidate_id, "approved", approved_commit=e.commit)
            await conv.note(f"Approved {e.candidate_id}: commit {e.commit[:12]} in your repository", "proposal")
            facts = getattr(self, "card_facts", None)
            if facts is not None and facts.apply:
                await conv.note(f"Apply it to your model: {facts.apply}", "proposal")
            self.notify(f"Approved {e.candidate_id} as commit {e.commit[:12]}", title="Approved")
            self._refresh_review(e.candidate_id)
        elif isinstance(e, ev.ProposalRejected):
            self.panel.set_state(e.candidate_id, "rejected", reason=e.reason)
            await conv.note(f"Rejected {e.candidate_id}: {e.reason}", "proposal")
            self._refresh_review(e.candidate_id)
        elif isinstance(e, ev.EngineerMessage):
            if e.text in self._echoed:
                self._echoed.remove(e.text)
            else:
                await conv.note(Text(f"you: {e.text}"), "engineer")
        elif isinstance(e, ev.Usage):
            self.tokens, self.cost = e.total_tokens, e.total_cost_usd
            self.prompt_tokens += e.prompt_tokens
            self.completion_tokens += e.completion_tokens
            self.status.set_usage(self.tokens, self.cost)
        elif isinstance(e, ev.BudgetReached):
            text = f"Budget reached: {e.budget} ({e.used:g} of {e.limit:g})"
            await conv.note(text, "warning")
            self.notify(text, severity="warning")
        elif isinstance(e, ev.ErrorEvent):
            await self.report_error("agent", e.message)
            self._refresh_review()  # e.g. landing an approval failed: the review screen stops saying "approving"
        elif isinstance(e, ev.Done):
            self.done_reason = e.reason
            await conv.end_message()
            extra = f", best candidate {e.best_candidate}" if e.best_candidate else ""
            await conv.note(f"Session ended ({e.reason}{extra})", "system")

    def refresh_budget(self) -> None:
        b = self.startup.budgets if self.startup else {}
        parts = []
        if b.get("max_turns"):
            parts.append(f"turn {self.turns}/{int(b['max_turns'])}")
        if b.get("max_cost_usd") is not None and "max_cost_usd" in b:
            parts.append(f"${self.cost:.2f}/${float(b['max_cost_usd']):.2f}")
        self.status.set_budget(" · ".join(parts))

    def open_review(self, record: CandidateRecord) -> None:
        if isinstance(self.screen, ReviewScreen):
            if self.screen.record.candidate_id == record.candidate_id:
                return
            self.pop_screen()
        self.push_screen(ReviewScreen(record))

    def _refresh_review(self, candidate_id: str | None = None) -> None:
        """A decision on the reviewed candidate landed (or failed: ``None``): end its approving state."""
        if isinstance(self.screen, ReviewScreen) and candidate_id in (None, self.screen.record.candidate_id):
            self.screen.approval_settled()

