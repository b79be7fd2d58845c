"""The review screen (diff + verdict, approve/reject/edit) and the small modal dialogs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Label, Static

from kernelpilot.approval_rule import check_approval
from kernelpilot.tui.diffview import render_side_by_side, render_unified
from kernelpilot.tui.verdict_view import verdict_text
from kernelpilot.tui.widgets.candidates import CandidateRecord

if TYPE_CHECKING:
    from kernelpilot.tui.app import KernelpilotApp


class ReviewScreen(Screen[None]):
    BINDINGS = [
        Binding("a", "approve", "Approve", id="approve"),
        Binding("r", "reject", "Reject", id="reject"),
        Binding("e", "edit", "Open in $EDITOR", id="edit"),
        Binding("s", "toggle_diff", "Side by side", id="toggle_diff"),
        Binding("escape", "back", "Back", id="back"),
    ]

    def __init__(self, record: CandidateRecord) -> None:
        super().__init__()
        self.record = record
        self.side_by_side = False
        self.approving = False  # 'a' pressed; the session's loop has not landed (or refused) it yet
        self.refused = ""  # why 'a' was refused (its verdict may not be approved: approval_rule)

    @property
    def kp(self) -> KernelpilotApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        with Vertical(id="review"):
            yield Label(self._title(), id="review-title")
            with Horizontal(id="review-body"):
                with VerticalScroll(id="review-diff"):
                    yield Static(render_unified(self.record.diff), id="diff-view")
                with VerticalScroll(id="review-verdict"):
                    yield Static(verdict_text(self.record.verdict), id="verdict-view")
        yield Footer()

    def _title(self) -> str:
        r = self.record
        bits = [f"Candidate {r.candidate_id}"]
        if r.source == "engineer":
            bits.append("(your edit)")
        if r.summary:
            bits.append(f"— {r.summary}")
        if r.state == "approved":
            bits.append(f"· APPROVED as commit {r.approved_commit[:12]}" if r.approved_commit else "· APPROVED")
        elif r.state == "rejected":
            bits.append(f"· REJECTED: {r.reason}")
        elif self.refused:
            bits.append(f"· NOT APPROVED: {self.refused}")
        elif r.state == "proposed" and self.approving:
            bits.append("· approving: the compute-sanitizer check (when a GPU is here), then a commit in your "
                        "repository")
        elif r.state == "proposed":
            bits.append("· proposed: a approve, r reject")
        return " ".join(bits)

    def refresh_title(self) -> None:
        self.query_one("#review-title", Label).update(self._title())

    def action_toggle_diff(self) -> None:
        self.side_by_side = not self.side_by_side
        render = render_side_by_side if self.side_by_side else render_unified
        self.query_one("#diff-view", Static).update(render(self.record.diff))

    def action_back(self) -> None:
        self.dismiss(None)

    @work(exclusive=True, group="review-approve", exit_on_error=False)
    async def action_approve(self) -> None:
        if self.record.state == "approved":
            self.notify(f"Already approved as {self.record.approved_commit[:12]}.")
            return
        if self.approving:
            self.notify(f"Approval of {self.record.candidate_id} is under way.")
            return
        check = check_approval(self.record.candidate_id, self.record.verdict)  # the rule the landing enforces too
        if not check.allowed:
            self.refused = check.refusal()
            self.refresh_title()
            self.notify(self.refused, title="Not approved", severity="error", timeout=10)
            return
        confirmed = ""
        if check.needs_confirmation:
            self.approving = True  # a second 'a' while the question is open does nothing
            yes = await self.app.push_screen_wait(
                ConfirmModal(check.question(), yes_label=f"Approve as {check.status} (y)"))
            self.approving = False
            if not yes:
                self.notify(f"Candidate {self.record.candidate_id} was not approved.")
                return
            confirmed = check.status
        self.approving = True
        self.refused = ""
        self.refresh_title()
        commit = await self.kp.approve_candidate(self.record.candidate_id, confirmed)
        if commit:
            self.record.state, self.record.approved_commit = "approved", commit
        # "" while the session runs: its loop lands the approval, and ProposalApproved (or
        # ProposalRejected, or an error) ends the approving state through approval_settled()
        self.approving = commit == "" and self.record.state == "proposed"
        self.refresh_title()

    def approval_settled(self) -> None:
        self.approving = False
        self.refresh_title()

    def action_reject(self) -> None:
        def done(reason: str | None) -> None:
            if reason is not None:
                self.run_worker(self._reject(reason), group="review-reject", exit_on_error=False)

        self.app.push_screen(ReasonModal(f"Why reject candidate {self.record.candidate_id}?"), done)

    async def _reject(self, reason: str) -> None:
        await self.kp.reject_candidate(self.record.candidate_id, reason)
        self.record.state, self.record.reason = "rejected", reason
        self.refresh_title()

    def action_edit(self) -> None:
        self.kp.open_in_editor(self.record)


class ReasonModal(ModalScreen[str | None]):
    """Asks for one line of text (a reject reason); Escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.prompt)
            yield Input(placeholder="reason (sent to the agent)", id="reason-input")

    @on(Input.Submitted, "#reason-input")
    def submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text:
            self.dismiss(text)
        else:
            self.notify("Type a reason, or Escape to cancel.", severity="warning")

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmModal(ModalScreen[bool]):
    """A yes/no question (resuming the last session; approving a verdict that needs a confirmation)."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, *, yes_label: str = "Yes (y)", **kw: Any) -> None:
        super().__init__(**kw)
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, id="confirm-question")
            with Horizontal(classes="buttons"):
                yield Button(self.yes_label, id="yes", variant="primary")
                yield Button("No (n)", id="no")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
