"""The evaluation engine: an honest verdict for one candidate kernel.

``Evaluator(settings).evaluate(problem, candidate, mode)`` (evaluator.py) runs the static policy (static/), the
build (build/, confined by sandbox/), then one request (client/) to a worker process (worker/) that verifies
(correctness/), audits (audit/) and times (timing/, baselines/, kernelbench/) the candidate on the GPU, and
returns a :class:`~kernelpilot.verdict.Verdict`. docs/architecture.md draws the path of one verdict.
"""

from kernelpilot.evaluation.evaluator import MODES, Evaluator
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.rules import RULE_NAMES as RULES
from kernelpilot.verdict import Finding

__all__ = ["EvalSettings", "Evaluator", "Finding", "MODES", "RULES"]
