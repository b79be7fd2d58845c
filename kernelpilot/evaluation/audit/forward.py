"""The runtime audit of one candidate's forward, inside the worker: one call under the operator recorder (ops.py)
and, on a GPU, one under torch.profiler (kernel_trace.py, kernels.py), each on inputs of its own and under the
watchdog's allowance for an instrumented call. runtime.py's docstring has the rules.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from kernelpilot.evaluation.audit import kernels, ops
from kernelpilot.evaluation.audit.kernel_trace import KernelTrace, profile_call
from kernelpilot.evaluation.correctness.inputs import draw_inputs
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.worker import watchdog
from kernelpilot.evaluation.worker.cuda_errors import is_cuda_error
from kernelpilot.verdict import Finding

if TYPE_CHECKING:
    from kernelpilot.evaluation.correctness.reference import Forward

# how many times slower a candidate's forward may run under the audit's instruments than its slowest verified
# call: a Python dispatch mode alone made a loop of 150k small ATen calls 7x (torch 2.11) to 11x (2.14) slower
# on our 2-core CPU machines, and the operator recorder does more per call; the profiler costs less
RECORDER_SLOWDOWN = 30.0
PROFILER_SLOWDOWN = 5.0

def audit_forward(model: Forward, problem: ModuleType, own_kernels: list[str], s: EvalSettings, notes: list[str],
                  seed: int, device: str) -> list[Finding]:
    """What ran inside forward: ATen ops, the output's type, and (CUDA) the kernels and their streams. ``problem``:
    the problem's module (the inputs are drawn from its get_inputs); ``own_kernels``: the build report's kernel
    names; ``notes``: the correctness notes, which say when the profiler failed."""
    cuda = device.startswith("cuda")
    found: list[Finding] = []
    audit_inputs = draw_inputs(problem, seed + 900, "normal", device)
    recorded: dict[str, ops.OpUse] | None = None
    try:
        with watchdog.calls("audit", "forward under the operator recorder", slowdown=RECORDER_SLOWDOWN):
            recorded, audit_out = ops.record_ops(model, audit_inputs)
        found += ops.op_findings(recorded, list(s.allowed_libraries or []), int(s.small_numel),
                                 rules=str(s.rules or "kernelpilot"))
        found += ops.output_type_findings(audit_out)
        del audit_out
    except Exception as exc:
        if is_cuda_error(exc):
            raise
        # a forward that only fails while its operators are recorded is hiding from the audit
        found.append(Finding(rule="audit-failed", evidence=f"{type(exc).__name__}: {str(exc)[:200]}",
                             message="forward raised while the harness recorded its operators; it must "
                                     "behave the same under the audit."))
    if cuda:  # other tensors than record_ops saw (both alive: distinct addresses), so a cache cannot hit
        profile_inputs = draw_inputs(problem, seed + 901, "normal", device)
        try:
            # the call alone under its allowance; the profiler's start, stop and export under the harness's
            trace = profile_call(model, profile_inputs, device, watch=lambda: watchdog.calls(
                "audit", "forward under torch.profiler", slowdown=PROFILER_SLOWDOWN))
        except Exception as exc:
            if is_cuda_error(exc):
                raise
            trace = KernelTrace()  # kernel_findings reports the profiler as unavailable
            notes.append(f"torch.profiler failed ({type(exc).__name__}: {str(exc)[:200]})")
        del profile_inputs
        if recorded is not None:  # which ops ran while another stream was current (the side-stream rule needs it)
            trace.off_stream_ops = sorted(n for n, use in recorded.items() if use.off_stream)
            trace.watched_dispatch = True
        found += kernels.kernel_findings(trace, own_kernels, list(s.allowed_libraries or []),
                                         rules=str(s.rules or "kernelpilot"))
    return found
