"""Why KernelBench's status of a candidate and ours differ: the one mapping from a verdict's typed fields
(its findings' rule ids, its status, ``Verdict.kernelbench``, ``Correctness.weights``) to a reason.

A difference is a verdict whose KernelBench score passes (``correct``) while ours does not (status ``ok``),
or the other way round, or whose two timings disagree on ``fast_1`` (one says faster than eager, the other
not). Each gets one reason, the first of ``REASONS`` that its evidence supports:

- ``caching``: the candidate returned a cached output (``result-replay``) or one output buffer on every call
  (``output-reuse``);
- ``stream``: work outside the timed stream: side streams, threads (``side-stream``, ``background-thread``...);
- ``timing``: a patched timer (``timer-patch``); a candidate that picks its path by timing itself
  (``self-timing``) passing one check and failing the other (its two instances, ours and KernelBench's, may
  have picked differently); or both pass and the two timings disagree on fast_1;
- ``fallback``: the compiled kernel never ran, PyTorch or a library did (``no-custom-kernel``);
- ``no_kernel``: a PyTorch rewrite with no kernel of its own (``no-kernel``);
- ``global_state``: torch's global switches (TF32, cudnn flags, matmul precision): KernelBench's reference
  ran in the candidate's state, ours in the problem's own (``global-state``, ``precision-lowered``);
- ``weights``: ours copied Model's weights by name, KernelBench seeds both constructors;
- ``precision``: the outputs' accuracy: our fp64 reference and tolerances, or KernelBench's cast to its
  harness precision and its ``allclose`` tolerance;
- ``other``: anything else (a build error, a timeout, a crash, a static refusal, a finding not above).

Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kernelpilot.verdict import Finding, Verdict

Reason = Literal["caching", "stream", "timing", "fallback", "no_kernel", "global_state", "weights", "precision",
                 "other"]
REASONS: tuple[Reason, ...] = ("caching", "stream", "timing", "fallback", "no_kernel", "global_state", "weights",
                               "precision", "other")
REASON_TITLES: dict[Reason, str] = {
    "caching": "caching (a cached or reused output)",
    "stream": "stream or thread (work the timer does not see)",
    "timing": "timing (a patched timer, a candidate that times itself, or the two timings disagree on fast_1)",
    "fallback": "fallback ran (no-custom-kernel: PyTorch or a library did the work)",
    "no_kernel": "no kernel (a pure PyTorch rewrite)",
    "global_state": "flags / global state (TF32, cudnn, matmul precision)",
    "weights": "weights (ours by name, KernelBench by seed)",
    "precision": "precision (fp64 reference and tolerances vs KernelBench's cast and allclose)",
    "other": "other",
}

# the finding rules that explain a difference, and the reason each gives
RULE_REASONS: dict[str, Reason] = {
    "result-replay": "caching", "output-reuse": "caching",
    "side-stream": "stream", "native-side-stream": "stream", "background-thread": "stream", "native-thread": "stream",
    "timer-patch": "timing",
    "no-custom-kernel": "fallback", "library-only": "fallback",
    "no-kernel": "no_kernel",
    "global-state": "global_state", "precision-lowered": "global_state",
}


@dataclass(frozen=True)
class Difference:
    """One verdict whose two scores differ, and why."""

    reason: Reason
    ours: str  # "rejected [no-custom-kernel]", "incorrect", "ok 1.31x"
    kernelbench: str  # "correct", "incorrect (0 / 5)", "correct 2.10x"
    detail: str
    rules: tuple[str, ...] = field(default_factory=tuple)  # the findings behind the reason


def reason_of_rule(rule: str) -> Reason:
    return RULE_REASONS.get(rule, "other")


def _first(reasons: list[Reason]) -> Reason:
    return min(reasons, key=REASONS.index) if reasons else "other"


def ours_label(v: Verdict) -> str:
    rejects = [f.rule for f in v.findings if f.severity == "reject"]
    speed = v.performance.speedup_vs_eager if v.performance else None
    if v.status == "rejected" and rejects:
        return f"rejected [{', '.join(dict.fromkeys(rejects))}]"
    return v.status + (f" {speed:.2f}x" if v.status == "ok" and speed else "")


def kernelbench_label(v: Verdict) -> str:
    kb = v.kernelbench
    if kb is None:
        return "no KernelBench score"
    trials = f" {kb.trials}" if kb.trials and kb.status == "incorrect" else ""
    speed = f" {kb.speedup:.2f}x" if kb.status == "correct" and kb.speedup else ""
    return kb.status + trials + speed


def _explained(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.rule in RULE_REASONS]


def classify(v: Verdict) -> Difference | None:
    """The difference between a verdict's KernelBench score and our status, or None when they agree (or the
    verdict has no KernelBench score: a run under the default rules)."""
    kb = v.kernelbench
    if kb is None:
        return None
    ours_pass, kb_pass = v.status == "ok", kb.status == "correct"
    labels = (ours_label(v), kernelbench_label(v))
    if kb.status == "not_run":
        return Difference("other", *labels,
                          detail=kb.error or "refused before running: KernelBench's harness did not run")
    if ours_pass and kb_pass:
        return _timing(v, labels)
    if ours_pass == kb_pass:
        return None
    explained = _explained(v.findings)
    if kb_pass:  # KernelBench accepts what we do not
        rejects = [f for f in v.findings if f.severity == "reject"]
        if v.status == "rejected":
            reasons = [reason_of_rule(f.rule) for f in rejects]
            rules = tuple(dict.fromkeys(f.rule for f in rejects))
            reason = _first(reasons)
            first = next(f for f in rejects if reason_of_rule(f.rule) == reason)
            return Difference(reason, *labels, detail=first.message or first.evidence, rules=rules)
        if v.status == "incorrect" and v.correctness is not None and v.correctness.inputs_unmodified is False:
            if v.correctness.outputs_own_storage is False:
                return Difference("other", *labels, detail=(
                    "the candidate wrote its output into its input's storage (or returned the input): KernelBench "
                    "compares values only, ours also which storage an output is"))
            return Difference("other", *labels, detail=(
                "the candidate modified its inputs: KernelBench compares after the reference has run, ours checks "
                "the inputs after every call"))
        if v.status == "incorrect":
            state = [f for f in explained if RULE_REASONS[f.rule] == "global_state"]
            if state:
                return Difference("global_state", *labels, rules=tuple(f.rule for f in state), detail=(
                    f"KernelBench's reference ran in the candidate's global state ({state[0].evidence}); ours in "
                    "the problem's own, against fp64"))
            return _self_timed(v, labels) or Difference("precision", *labels, detail=_precision_detail(v))
        return Difference("other", *labels, detail=(v.error or v.summary or v.status).splitlines()[0][:300]
                          if (v.error or v.summary) else v.status)
    # ours passes, KernelBench's harness does not
    if kb.status == "incorrect":
        if v.correctness is not None and v.correctness.weights == "by name":
            return Difference("weights", *labels, detail=(
                "ours copied Model's weights into ModelNew by name; KernelBench seeds both constructors, so "
                "parameters created in another order get other values"))
        state = [f for f in explained if RULE_REASONS[f.rule] == "global_state"]
        if state:
            return Difference("global_state", *labels, rules=tuple(f.rule for f in state),
                              detail=f"the candidate changed torch's global state ({state[0].evidence})")
        timed_self = _self_timed(v, labels)
        if timed_self:
            return timed_self
        return Difference("precision", *labels, detail=(
            f"KernelBench's allclose at {kb.tolerance:g} in {kb.precision}" if kb.tolerance is not None
            else f"KernelBench's allclose in {kb.precision}") + (
            f", max difference {kb.max_difference[0]}" if kb.max_difference else ""))
    return Difference("other", *labels, detail=(kb.error or kb.status).splitlines()[0][:300])


def _self_timed(v: Verdict, labels: tuple[str, str]) -> Difference | None:
    """One check passed, the other failed, and the candidate picks its path by timing itself: its two instances
    (ours, KernelBench's) may have picked different paths (an fp32 matmul in one, fp16 in the other)."""
    signs = [f for f in v.findings if f.rule == "self-timing"]
    if not signs:
        return None
    return Difference("timing", *labels, rules=("self-timing",), detail=(
        f"the candidate picks its path by timing itself ({signs[0].evidence}): KernelBench's instance and ours "
        f"may have picked differently; {_precision_detail(v)}"))


def _precision_detail(v: Verdict) -> str:
    c = v.correctness
    kb = v.kernelbench
    worst = max((t.normalized_error for t in (c.trials if c else []) if t.normalized_error is not None), default=None)
    ours = f"ours: atol {c.atol:g}, rtol {c.rtol:g} against an fp64 reference" if c and c.atol is not None else \
        "ours: against an fp64 reference"
    if worst is not None:
        ours += f", normalised error up to {worst:.2e}"
        if c and c.max_normalized_error is not None:
            ours += f" (bound {c.max_normalized_error:.0e})"
    theirs = f"KernelBench: allclose at {kb.tolerance:g} in {kb.precision}" if kb and kb.tolerance is not None else ""
    return "; ".join(x for x in (ours, theirs) if x)


def _timing(v: Verdict, labels: tuple[str, str]) -> Difference | None:
    """Both pass: a difference only when the two timings disagree on fast_1 (faster than eager or not)."""
    ours = v.performance.speedup_vs_eager if v.performance else None
    theirs = v.kernelbench.speedup if v.kernelbench else None
    if ours is None or theirs is None or (ours > 1.0) == (theirs > 1.0):
        return None
    return Difference("timing", *labels, detail=(
        f"KernelBench's timing {theirs:.2f}x vs eager, ours {ours:.2f}x ("
        + ("its timing has no L2 flush" if v.kernelbench and v.kernelbench.preset == "v0.1" else
           "its mean of CUDA-event trials on one input set vs our median over fresh inputs") + ")"))


def group(differences: list[tuple[str, Difference]]) -> dict[Reason, list[tuple[str, Difference]]]:
    """(job, difference) pairs per reason, in ``REASONS`` order; reasons with none are left out."""
    out: dict[Reason, list[tuple[str, Difference]]] = {}
    for reason in REASONS:
        items = [(job, d) for job, d in differences if d.reason == reason]
        if items:
            out[reason] = items
    return out
