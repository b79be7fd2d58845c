"""KernelBench's own score of a candidate inside the worker (a KernelBench rule preset): its harness run as
KernelBench runs it, in the candidate's global state, on the GPU alone, under one watchdog allowance."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from kernelpilot.evaluation.kernelbench import harness as kb
from kernelpilot.evaluation.kernelbench.inputs import KernelBenchInputs
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.static import self_timing
from kernelpilot.evaluation.worker import global_state as gs
from kernelpilot.evaluation.worker import watchdog
from kernelpilot.evaluation.worker.cuda_errors import is_cuda_error
from kernelpilot.rules import Rules

if TYPE_CHECKING:
    from kernelpilot.evaluation.worker.problem_state import ProblemState


def score(state: ProblemState, module: ModuleType, rules: Rules, s: EvalSettings, device: str,
          measure: bool, default: gs.Snapshot, mine: gs.Snapshot) -> dict[str, Any]:
    """KernelBench's own score (kernelbench_harness.py), run as KernelBench runs it: in the candidate's
    global state for the reference too; every candidate call under one watchdog allowance."""
    harness = rules.harness
    assert harness is not None  # rules.kernelbench: a KernelBench preset
    if state.kb_inputs is None:
        state.kb_inputs = KernelBenchInputs(state.module, device)
    changes = default.changes(mine)
    note = ("KernelBench's harness imports ModelNew before running anything: its reference ran in the "
            f"candidate's global state ({'; '.join(changes)}), here too") if changes else ""
    calls = 2 * (harness.trials + (harness.warmup + harness.perf_trials + harness.discard_first if measure else 0)) + 2
    try:
        # KernelBench runs on a GPU of its own: ModelNew(...), its trials (a first call that may tune itself) and
        # its timing get this GPU to themselves here too, never beside another process's compile (self_timing.py)
        with self_timing.gpu_alone("KernelBench's harness"), \
                watchdog.calls("kernelbench", "KernelBench's harness (its trials and timing)", n=calls), \
                gs.applied(mine):
            return kb.score(state.module, module.ModelNew, harness, str(s.kb_precision or "fp32"), device,
                            measure, note, inputs_cache=state.kb_inputs)
    except Exception as exc:
        if is_cuda_error(exc):
            raise
        # what escapes KernelBench's eval_kernel_against_ref (ModelNew(...) raising anything but a RuntimeError,
        # say) is caught by its batch scorer as "other_error", with compiled=False
        return {"preset": harness.version, "commit": harness.commit, "status": "compile_error", "compiled": False,
                "error": f"{type(exc).__name__}: {str(exc)[:400]}",
                "notes": ([note] if note else []) + ["KernelBench's batch scorer records an exception that escapes its "
                                                     "harness as not compiled (other_error)"]}
