"""The problem's own model as the reference, inside the worker: its outputs in the problem dtype and in float64,
and which of its outputs are its inputs' storage (imports torch lazily)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from kernelpilot.evaluation.correctness import output_reuse
from kernelpilot.evaluation.correctness.compare import Outputs
from kernelpilot.evaluation.correctness.inputs import Inputs, clone_inputs, upcast
from kernelpilot.evaluation.worker import memory

if TYPE_CHECKING:
    import torch

# what the checks and the timer call: a model's forward (Model, ModelNew, a torch.compile build, a wrapper)
Forward = Callable[..., Outputs]


# ---- the check ----------------------------------------------------------------------------------
@dataclass
class Reference:
    model: torch.nn.Module  # problem dtype
    model64: torch.nn.Module | None  # float64 copy, or None when it cannot run in float64
    module: ModuleType  # the problem module (get_inputs)
    note: str = ""
    # positions of the reference's outputs that are its inputs' storage (``return x.view(...)``); found the
    # first time a candidate's output is an input's storage, then kept with the problem
    input_aliases: frozenset[int] | None = None



def run_model(fn: Forward, inputs: Inputs, device: str) -> Outputs:
    import torch

    with torch.no_grad():
        out = fn(*inputs)
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    return out



def reference_aliases(ref: Reference, pristine: Inputs, device: str) -> frozenset[int] | None:
    """Which of the reference's outputs are its inputs' storage (one more reference call, once per problem);
    None when that call does not fit in memory beside the trial's tensors."""
    import torch

    if ref.input_aliases is None:
        try:
            inputs = clone_inputs(pristine)
            ref.input_aliases = output_reuse.input_aliases(run_model(ref.model, inputs, device), inputs)
        except torch.cuda.OutOfMemoryError:
            memory.release(device)
            return None
    return ref.input_aliases



def reference_outputs(ref: Reference, pristine: Inputs, device: str) -> tuple[Outputs, Outputs]:
    out = run_model(ref.model, clone_inputs(pristine), device)
    if ref.model64 is None:
        return out, out
    import torch

    oom = ""
    try:
        return out, run_model(ref.model64, upcast(pristine), device)
    except torch.cuda.OutOfMemoryError as exc:
        oom = str(exc)
    except Exception as exc:  # an op without a float64 kernel: fall back to the dtype reference
        ref.model64 = None
        ref.note = f"float64 reference unavailable ({type(exc).__name__}: {exc}); compared with the problem dtype"
        return out, out
    # The float64 copy of a large problem may not fit beside the candidate's tensors: compare with PyTorch's
    # own result in the problem's dtype, and say what that bound means (freed outside the except block,
    # whose traceback still holds the failed call's tensors)
    need = memory.requested_bytes(oom)
    ref.model64 = None
    memory.release(device)
    ref.note = ("the float64 reference did not fit in GPU memory" + (f" (it asked for {need / 2**30:.1f} GiB more)"
                if need else "") + "; outputs were compared with PyTorch's own result in the problem's dtype "
                "(atol/rtol as usual, normalised error within the dtype's threshold against that result; its "
                "own error against the exact result is not measured for this problem)")
    return out, out



def bitwise_equal(a: object, b: object) -> bool:
    import torch

    if type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))
