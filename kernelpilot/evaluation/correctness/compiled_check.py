"""torch.compile's own output put through exactly the check a candidate gets (worker side; issue 51 item 2).

A candidate made of torch.compile's kernels (KernelBench's c0, an Inductor conversion) can only be as correct as
torch.compile is. Where torch.compile itself fails the check at the problem's tolerances (the TF32 convolution
family at fp32), "the c0 is incorrect" says nothing about the conversion: every verdict of that problem says so.
The check is ``verify.verify`` unchanged: the same trials, input distributions, seed, shape sets and tolerance as
the candidate's, against the same float64 reference (and its cache of outputs per seed). Its answer is one line:
``passed``, or ``failed: <the first failing trial's message>``; every verdict of the problem carries it
(``Correctness.compiled_check``), an incorrect one too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelpilot.evaluation.correctness import verify as vf

if TYPE_CHECKING:
    from kernelpilot.evaluation.correctness.compare import Tolerance
    from kernelpilot.evaluation.correctness.reference import Forward, Reference
    from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache
    from kernelpilot.evaluation.settings import EvalSettings
    from kernelpilot.evaluation.worker.problem_state import ProblemState

PASSED = "passed"
FAILED = "failed"


def check_compiled(compiled: Forward, ref: Reference, tol: Tolerance, s: EvalSettings, device: str,
                   cache: ReferenceCache | None = None, poison_bytes: int = 64 << 20) -> str:
    """``passed`` / ``failed: why`` for torch.compile's build of the problem's model."""
    shape_sets: list[tuple[str, vf.ShapeSet | None]] = [("default", None)]
    shape_sets += [(e["name"], e) for e in s.extra_shapes or []]
    try:
        corr = vf.verify(compiled, ref, tol, trials=int(s.trials), distributions=list(s.distributions or ["normal"]),
                         seed=int(s.seed), device=device, shape_sets=shape_sets, poison_bytes=poison_bytes,
                         cache=cache)
    except Exception as exc:  # noqa: BLE001 - torch.compile's run failing is the answer, not the engine's error
        return f"{FAILED}: it raised {type(exc).__name__}: {str(exc)[:300]}"
    if corr.passed:
        return PASSED
    failed = next((t for t in corr.trials if not t.passed), None)
    return f"{FAILED}: {failed.message[:400] if failed and failed.message else 'a trial failed'}"


def flag(result: str) -> str:
    """The verdict's flag for a problem where torch.compile fails the check ("" when it passes or was not run)."""
    if not result.startswith(FAILED):
        return ""
    return ("torch.compile itself fails this problem's check at these tolerances (" + result[len(FAILED) + 2:][:240]
            + "): a candidate made of torch.compile's kernels fails it too; its 'incorrect' is torch.compile's")


def once(state: ProblemState, compiled: Forward, tol: Tolerance, s: EvalSettings, device: str,
         shared: str = "") -> str:
    """The problem's check of torch.compile, made once per problem in this worker: ``shared`` when the baseline
    service made it already (the same check: same seeds, trials and tolerance), else here."""
    if not state.compiled_check:
        state.compiled_check = shared or check_compiled(compiled, state.reference, tol, s, device, state.references)
    return state.compiled_check
