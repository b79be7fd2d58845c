"""The worker step of ``Evaluator.evaluate`` on its own, for plain-Python candidates on the CPU (tests only).

Policy and build are skipped (the candidates under tests/data/cpu are plain Python); the answer is the verdict
as ``Evaluator.evaluate`` merges it: the worker's steps after the parent's (its start included).
"""

from __future__ import annotations

from pathlib import Path

from kernelpilot.evaluation import Evaluator
from kernelpilot.verdict import Verdict


def ask_worker(ev: Evaluator, candidate: Path, problem: Path, timeout: float = 120) -> Verdict:
    """A test-mode evaluation of ``candidate`` against ``problem`` in ``ev``'s worker."""
    v = Verdict(status="ok")
    message = {"op": "evaluate", "problem": str(problem), "candidate_model": str(candidate), "mode": "test",
               "settings": ev.settings.to_dict()}
    response = ev._ask(message, timeout, v)
    if response is None:  # the worker failed: ``v`` says how (status and error)
        return v
    out = Verdict.from_dict(response["verdict"])
    out.phases = {**v.phases, **out.phases}
    return out
