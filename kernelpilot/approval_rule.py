"""Which verdicts may be approved: the one rule every approval path applies (landing, agent, UI).

A candidate is approved by its last verdict's *shown status*: the verdict's status, except that a
build-only verdict (mode ``build``, status ``ok``: no GPU, or ``--mode build``) is ``built``, and a
candidate with no verdict is ``unevaluated``.

- ``ok``: approvable.
- ``incorrect``, ``rejected`` (by the audit) and ``built`` (never run or timed): approvable only with
  an explicit confirmation that names the status; the commit then says it.
- everything else (``build_error``, ``runtime_error``, ``timeout``, ``problem_too_large``,
  ``superseded``, ``unevaluated``): refused, with the reason.

Front-ends ask :func:`check_approval` to render a refusal or a confirmation; :func:`require_approvable`
raises the typed errors, and is what ``kernelpilot.landing.land`` calls before anything changes.
This module imports nothing heavy and knows no agent or screen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelpilot.errors import ApprovalConfirmationError, ApprovalRefusedError

APPROVABLE = "ok"
NEEDS_CONFIRMATION: dict[str, str] = {
    "incorrect": "it failed the correctness check",
    "rejected": "the audit rejected it (see its findings)",
    "built": "it was only built: nothing checked that it is correct or timed it (no GPU)",
}
REFUSED: dict[str, str] = {
    "build_error": "it does not build",
    "runtime_error": "it crashed or failed at run time",
    "timeout": "it timed out",
    "problem_too_large": "the problem itself does not fit the GPU, so nothing about the candidate was checked",
    "superseded": "a newer save replaced it before it was evaluated",
    "unevaluated": "it has no verdict yet",
}
WHAT_TO_DO: dict[str, str] = {
    "superseded": "approve the newer save instead",
    "unevaluated": "wait for its verdict (or evaluate it) and approve again",
}


@dataclass(frozen=True)
class ApprovalCheck:
    """What the rule says about approving one candidate now."""

    candidate_id: str
    status: str  # the shown status: ok, built, incorrect, rejected, build_error, ..., unevaluated
    allowed: bool  # may be approved at all
    needs_confirmation: bool  # only with the engineer's explicit confirmation naming ``status``
    reason: str  # why it is refused, or what the confirmation must accept ("" for ok)
    summary: str = ""  # the verdict's one line

    def refusal(self) -> str:
        """The sentence a refused approval is reported with."""
        fix = WHAT_TO_DO.get(self.status, "fix it, let it be evaluated again, and approve the new candidate")
        said = f" ({self.summary})" if self.summary and self.status != "unevaluated" else ""
        return (f"candidate {self.candidate_id} cannot be approved: its verdict is {self.status}{said}, "
                f"and {self.reason}; {fix} (nothing was changed).")

    def question(self) -> str:
        """The confirmation question for a status that needs one."""
        said = f": {self.summary}" if self.summary else ""
        return (f"Candidate {self.candidate_id}'s verdict is {self.status.upper()}{said}. {self.reason[0].upper()}"
                f"{self.reason[1:]}. Approve it anyway? Its commit will say it was approved as {self.status}.")


def shown_status(verdict: Mapping[str, Any] | Any | None) -> str:
    """``built`` for a build-only ok verdict, ``unevaluated`` for none, else the verdict's status."""
    if verdict is None:
        return "unevaluated"
    get = verdict.get if isinstance(verdict, Mapping) else (lambda key: getattr(verdict, key, None))
    status = str(get("status") or "")
    if not status:
        return "unevaluated"
    if status == "ok" and get("mode") == "build":
        return "built"
    return status


def _summary(verdict: Mapping[str, Any] | Any | None) -> str:
    if verdict is None:
        return ""
    value = verdict.get("summary") if isinstance(verdict, Mapping) else getattr(verdict, "summary", "")
    return str(value or "").strip().splitlines()[0] if value else ""


def check_approval(candidate_id: str, verdict: Mapping[str, Any] | Any | None) -> ApprovalCheck:
    """What the rule says about ``candidate_id`` with this last verdict (a dict, a Verdict, or None)."""
    return check_status(candidate_id, shown_status(verdict), _summary(verdict))


def check_status(candidate_id: str, status: str, summary: str = "") -> ApprovalCheck:
    """The same from a shown status already known (a workspace keeps it per candidate); "" is unevaluated."""
    status = status or "unevaluated"
    if status == APPROVABLE:
        return ApprovalCheck(candidate_id, status, True, False, "", summary)
    if status in NEEDS_CONFIRMATION:
        return ApprovalCheck(candidate_id, status, True, True, NEEDS_CONFIRMATION[status], summary)
    reason = REFUSED.get(status, f"a verdict of status {status!r} is not one that can be approved")
    return ApprovalCheck(candidate_id, status, False, False, reason, summary)


def require_approvable(check: ApprovalCheck, confirmed: str = "") -> ApprovalCheck:
    """``check`` itself, or ``ApprovalRefusedError`` (never approvable) / ``ApprovalConfirmationError``
    (approvable only when ``confirmed`` names its status)."""
    if not check.allowed:
        raise ApprovalRefusedError(check.refusal(), status=check.status)
    if check.needs_confirmation and confirmed != check.status:
        raise ApprovalConfirmationError(
            f"candidate {check.candidate_id}'s verdict is {check.status} ({check.reason}); approving it needs an "
            f"explicit confirmation that names that status (nothing was changed).", status=check.status)
    return check
