"""The proposal flow of AgentSession: ProposalReady, then the engineer's (or the policy's) decision.

Policies: ``None`` waits for ``approve``/``reject`` from the engineer (TUI); ``"faster-than-compile"``
approves a proposal whose verdict tier is faster_than_compile and rejects others with the reason;
``"never"`` records the proposal for review after a headless run and approves nothing.
Landing an approval (git) is never interrupted by a cancel, so no half-done commit is left.
Every approval, the engineer's or the policy's, goes by the candidate's last verdict
(``kernelpilot.approval_rule``): refused with the reason, or, for an incorrect, rejected or build-only
verdict, landed only when the engineer confirmed that status (``approve(cid, confirmed=STATUS)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING, Any

from kernelpilot.agent.events import ErrorEvent, Event, ProposalApproved, ProposalReady, ProposalRejected
from kernelpilot.approval_rule import check_approval, require_approvable
from kernelpilot.errors import KernelpilotError
from kernelpilot.landing import approve
from kernelpilot.profiling.sanitizer import gate_available, run_sanitizer

if TYPE_CHECKING:
    from kernelpilot.agent.tools import ToolResult


class ProposalMixin:
    # provided by AgentSession
    book: Any
    workspace: Any
    auto_approve: str | None
    _decisions: dict[str, tuple[bool, str]]  # (approved, the rejection's reason | the status an approval confirmed)
    _pending: str
    _wake: asyncio.Event
    _running: bool

    # ---- the engineer's side -----------------------------------------------------------------
    async def approve(self, candidate_id: str, confirmed: str = "") -> str:
        """Approve a candidate (``confirmed``: the status the engineer confirmed, for a verdict that needs
        it). While ``run()`` is going, the loop lands it (ProposalApproved, Done) and this returns "";
        after ``run()`` has ended it is landed here and the commit is returned."""
        if self._running:
            self._decisions[candidate_id] = (True, confirmed)
            self._wake.set()
            return ""
        self._check_verdict(candidate_id, confirmed)
        commit = str(await asyncio.to_thread(partial(approve, self.workspace, candidate_id, confirmed=confirmed)))
        self.book.approved, self.book.approved_commit = candidate_id, commit
        self._record(ProposalApproved(candidate_id=candidate_id, commit=commit))  # type: ignore[attr-defined]
        return commit

    async def reject(self, candidate_id: str, reason: str) -> None:
        """Reject a candidate; the reason goes to the model (at once, or when the session resumes)."""
        reason = reason.strip() or "no reason given"
        if self._running:
            self._decisions[candidate_id] = (False, reason)
            self._wake.set()
            return
        await asyncio.to_thread(self.workspace.reject, candidate_id, reason)
        self._append({"role": "user",  # type: ignore[attr-defined]
                      "content": f"The engineer rejected {candidate_id}: {reason}"})
        self._record(ProposalRejected(candidate_id=candidate_id, reason=reason))  # type: ignore[attr-defined]

    def _check_verdict(self, cid: str, confirmed: str) -> None:
        """ApprovalRefusedError unless the candidate's last verdict may be approved (with ``confirmed``)."""
        record = self.book.get(cid)
        require_approvable(check_approval(cid, record.verdict if record is not None else None), confirmed)

    def _policy_decision(self, cid: str) -> tuple[bool, str]:
        record = self.book.get(cid)
        if record is not None and record.tier == "faster_than_compile":
            return True, ""
        svc = record.speedup_vs_compile if record is not None else None
        speed = f"{svc:.3g}x vs torch.compile" if svc else "no speedup measured"
        tier = record.tier if record is not None else "unknown"
        return False, (f"auto-approve policy faster-than-compile: {cid} is tier {tier} ({speed}); it must be more "
                       f"than 5% faster than torch.compile. Keep optimising, benchmark, and propose again.")

    async def _proposal(self, result: ToolResult) -> AsyncIterator[Event]:
        cid = result.proposal
        record = self.book.get(cid)
        yield self._emit(ProposalReady(candidate_id=cid, summary=result.summary,  # type: ignore[attr-defined]
                                       verdict=record.verdict if record else {}, diff=record.diff if record else ""))
        if self.auto_approve == "never":
            self.book.pending = cid
            result.text = (f"Proposal {cid} is recorded for the engineer to review after this headless session "
                           f"(auto-approve is off). Improve it further if you can, otherwise stop.")
            return
        if self.auto_approve == "faster-than-compile":
            decision = self._policy_decision(cid)
        else:
            self._pending = cid
            try:
                while cid not in self._decisions:
                    self._wake.clear()
                    await self._race(self._wake.wait(), deadline=False)  # type: ignore[attr-defined]
            finally:
                self._pending = ""
            decision = self._decisions.pop(cid)
        async for event in self._apply_decision(cid, decision, result):
            yield event

    async def _sanitizer_gate(self, cid: str) -> tuple[bool, str]:
        """compute-sanitizer (memcheck, and racecheck when shared memory is used) before anything lands.

        Runs on the candidate's files in the worktree when a GPU and compute-sanitizer are there
        (KERNELPILOT_SANITIZE=0 turns it off); a finding blocks the approval and goes to the model.
        """
        if not gate_available():
            return True, ""
        candidate = self.workspace.path / self.ctx.candidate_rel  # type: ignore[attr-defined]
        report = await asyncio.to_thread(run_sanitizer, self.problem.path, candidate)  # type: ignore[attr-defined]
        if report.passed:
            return True, ""
        return False, f"the sanitizer gate refused {cid}:\n{report.text()}\nFix these before proposing again."

    async def _apply_decision(self, cid: str, decision: tuple[bool, str],
                              result: ToolResult | None) -> AsyncIterator[Event]:
        approved, reason = decision
        confirmed = reason if approved else ""
        if approved:
            try:
                self._check_verdict(cid, confirmed)  # before the sanitizer runs on what may not land anyway
            except KernelpilotError as exc:
                yield self._not_landed(cid, exc, result)
                return
            approved, reason = await self._sanitizer_gate(cid)
        if approved:
            try:
                land = partial(approve, self.workspace, cid, confirmed=confirmed)
                commit = str(await asyncio.shield(asyncio.to_thread(land)))
            except KernelpilotError as exc:
                yield self._not_landed(cid, exc, result)
                return
            self.book.approved, self.book.approved_commit = cid, commit
            yield self._emit(ProposalApproved(candidate_id=cid, commit=commit))  # type: ignore[attr-defined]
            if result is not None:
                result.text = (f"The engineer approved {cid}; it is committed as {commit[:12]} in their repository. "
                               "The session is complete.")
            self._finish("proposal_approved")  # type: ignore[attr-defined]
            return
        try:
            await asyncio.shield(asyncio.to_thread(self.workspace.reject, cid, reason))
        except KernelpilotError:
            pass  # the rejection still reaches the model
        yield self._emit(ProposalRejected(candidate_id=cid, reason=reason))  # type: ignore[attr-defined]
        text = f"The engineer rejected {cid}: {reason}\nAct on this, benchmark again, and propose when it is better."
        if result is not None:
            result.text = text
        else:
            self._append({"role": "user", "content": text})  # type: ignore[attr-defined]

    def _not_landed(self, cid: str, exc: KernelpilotError, result: ToolResult | None) -> Event:
        """An approval refused or failed: the engineer sees why, and so does the model."""
        text = f"The engineer approved {cid}, but it was not landed: {exc}"
        if result is not None:
            result.text, result.ok = text, False
        else:
            self._append({"role": "user", "content": text})  # type: ignore[attr-defined]
        return self._emit(ErrorEvent(message=f"Approving {cid} failed: {exc}",  # type: ignore[attr-defined]
                                     recoverable=True))

    async def _decide_unproposed(self, cid: str) -> AsyncIterator[Event]:
        """The engineer approved or rejected a candidate the model did not propose (e.g. from the table)."""
        decision = self._decisions.pop(cid)
        if self.book.get(cid) is None and decision[0]:
            yield self._emit(ErrorEvent(message="There is no benchmarked candidate "  # type: ignore[attr-defined]
                                                f"{cid} to approve.", recoverable=True))
            return
        async for event in self._apply_decision(cid, decision, None):
            yield event
        if getattr(self, "done", None) is not None:
            yield self._emit(self.done)  # type: ignore[attr-defined]
