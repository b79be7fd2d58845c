"""The evaluation engine: an honest verdict for one candidate kernel.

``Evaluator(settings).evaluate(problem, candidate, mode)`` (evaluator.py) runs the static policy (static/), the
build (build/, confined by sandbox/), then one request (client/) to a worker process (worker/) that verifies
(correctness/), audits (audit/) and times (timing/, baselines/, kernelbench/) the candidate on the GPU, and
returns a :class:`~kernelpilot.verdict.Verdict`. docs/architecture.md draws the path of one verdict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.rules import RULE_NAMES as RULES
from kernelpilot.verdict import Finding

if TYPE_CHECKING:
    from kernelpilot.evaluation.evaluator import MODES, Evaluator

__all__ = ["EvalSettings", "Evaluator", "Finding", "MODES", "RULES"]


def __getattr__(name: str) -> Any:
    """``Evaluator`` and ``MODES`` are imported on first use: a sub-package (the machine's baseline cache, read by the
    launcher before the screen loads) does not pay for the whole pipeline's imports."""
    if name in ("Evaluator", "MODES"):
        from kernelpilot.evaluation import evaluator

        return getattr(evaluator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
