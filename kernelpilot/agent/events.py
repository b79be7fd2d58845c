"""Typed events the agent loop yields; every front-end (TUI, headless JSONL) renders only these.

Each event is a small dataclass with a ``kind`` tag and round-trips through JSON (``to_dict`` /
``event_from_dict``), so a transcript of events can be replayed into any front-end.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    at: float = field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = self.kind
        return d


@dataclass
class SessionStarted(Event):
    kind: ClassVar[str] = "session_started"
    session_id: str
    problem: str
    model: str
    replay: bool = False  # True when the scripted client drives the loop: front-ends must say so
    worktree: str = ""
    branch: str = ""


@dataclass
class TextDelta(Event):
    """A piece of streamed assistant text."""

    kind: ClassVar[str] = "text_delta"
    text: str


@dataclass
class AssistantMessage(Event):
    """The assistant's full text for one turn (after the deltas)."""

    kind: ClassVar[str] = "assistant_message"
    text: str
    turn: int


@dataclass
class ToolCallStarted(Event):
    kind: ClassVar[str] = "tool_call_started"
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolCallFinished(Event):
    kind: ClassVar[str] = "tool_call_finished"
    call_id: str
    name: str
    result: str  # the text the model sees
    ok: bool = True
    seconds: float = 0.0


@dataclass
class CandidateEvaluated(Event):
    kind: ClassVar[str] = "candidate_evaluated"
    candidate_id: str
    verdict: dict[str, Any]  # kernelpilot.verdict.Verdict.to_dict()
    diff: str = ""  # unified diff against the original candidate
    commit: str = ""  # checkpoint commit in the worktree
    source: str = "agent"  # "agent" | "engineer" (manual edit)


@dataclass
class ProposalReady(Event):
    """The agent proposes a candidate; the engineer must approve or reject."""

    kind: ClassVar[str] = "proposal_ready"
    candidate_id: str
    summary: str
    verdict: dict[str, Any]
    diff: str = ""


@dataclass
class ProposalApproved(Event):
    kind: ClassVar[str] = "proposal_approved"
    candidate_id: str
    commit: str  # the commit in the user's repository


@dataclass
class ProposalRejected(Event):
    kind: ClassVar[str] = "proposal_rejected"
    candidate_id: str
    reason: str


@dataclass
class EngineerMessage(Event):
    kind: ClassVar[str] = "engineer_message"
    text: str


@dataclass
class Usage(Event):
    """Token usage and cost after one model turn, with session totals."""

    kind: ClassVar[str] = "usage"
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    total_tokens: int
    total_cost_usd: float


@dataclass
class BudgetReached(Event):
    kind: ClassVar[str] = "budget_reached"
    budget: str  # "turns" | "tokens" | "cost" | "wall_time"
    limit: float
    used: float


@dataclass
class ErrorEvent(Event):
    kind: ClassVar[str] = "error"
    message: str
    recoverable: bool = True


@dataclass
class Done(Event):
    kind: ClassVar[str] = "done"
    reason: str  # "proposal_approved" | "budget" | "cancelled" | "finished" | "error"
    best_candidate: str = ""
    approved_commit: str = ""


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        SessionStarted,
        TextDelta,
        AssistantMessage,
        ToolCallStarted,
        ToolCallFinished,
        CandidateEvaluated,
        ProposalReady,
        ProposalApproved,
        ProposalRejected,
        EngineerMessage,
        Usage,
        BudgetReached,
        ErrorEvent,
        Done,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    data = dict(data)
    cls = EVENT_TYPES[data.pop("kind")]
    return cls(**data)
