"""Timing a training drop-in as a training step runs it: forward, then backward.

A candidate whose ``ModelNew`` defines ``backward(grads, *inputs)`` (the drop-in protocol,
docs/model-to-faster-model.md) may do part of the backward's work in its forward: a chunked head+loss computes the
gradients of the hidden states and the weight chunk by chunk there, three matmuls where the reference's forward has
one. Timed forward against forward it read 0.23-0.33x torch.compile while its training step was faster. So such a
candidate is timed as a step: each implementation runs its forward, then its backward with the same cotangents
(eager and torch.compile through autograd, the candidate through its own ``backward``), and each timed call returns
its outputs and the gradients of the floating-point inputs and of the parameters, which the replay check compares
with eager's on the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernelpilot.evaluation.correctness.compare import flatten_outputs

if TYPE_CHECKING:
    import torch

    from kernelpilot.evaluation.correctness.inputs import Inputs
    from kernelpilot.evaluation.correctness.reference import Forward

TIMED = "forward+backward"
FLAG = ("timed as a training step (ModelNew defines backward): eager, torch.compile and the candidate each ran "
        "forward then backward with the same cotangents, and the timed calls' gradients were checked against "
        "eager's; the speed of light is not given (the problem's analysis counts the forward only)")
OUT_OF_MEMORY = ("timed forward only: a training step (eager's, torch.compile's or the candidate's) did not fit in the "
                 "GPU's memory beside the timing's input sets ({error}); these are forward times, not a step's")
POOL_FACTOR = 3  # a step's peak against its forward's, for sizing the input pool only (never for a verdict)


class Cotangents:
    """One fixed random cotangent per output position, drawn on first use (seeded), shared by every implementation
    so that their gradients are comparable."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.drawn: dict[int, torch.Tensor] = {}

    def for_outputs(self, outs: Sequence[Any]) -> list[torch.Tensor]:
        import torch

        got = []
        for i, o in enumerate(outs):
            c = self.drawn.get(i)
            if c is None or c.shape != o.shape or c.dtype != o.dtype or c.device != o.device:
                gen = torch.Generator(device="cpu").manual_seed(self.seed + 9100 + i)
                c = torch.randn(tuple(o.shape), generator=gen, dtype=torch.float32).to(device=o.device, dtype=o.dtype)
                self.drawn[i] = c
            got.append(c)
        return got


def _tensor_outputs(out: object) -> list[torch.Tensor]:
    import torch

    return [o for o in flatten_outputs(out) if isinstance(o, torch.Tensor) and o.is_floating_point()]


def _float_positions(inputs: Sequence[object]) -> list[int]:
    import torch

    return [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]


def parameter_names(reference: torch.nn.Module, candidate: torch.nn.Module) -> list[str]:
    """The parameters whose gradients are compared: the reference's trainable ones that the candidate has too."""
    import torch

    if not isinstance(reference, torch.nn.Module):  # a plain function as the reference: no parameters
        return []
    theirs = dict(candidate.named_parameters()) if isinstance(candidate, torch.nn.Module) else {}
    return [n for n, p in reference.named_parameters() if p.requires_grad and n in theirs]


def _filled(grads: Sequence[object], like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Gradients with a missing one (None) as zeros of its tensor's shape: what an unused input's gradient is."""
    import torch

    return [g if isinstance(g, torch.Tensor) else torch.zeros_like(t) for g, t in zip(grads, like)]


def reference_step(fn: Forward, module: torch.nn.Module, names: list[str], cot: Cotangents) -> Forward:
    """Eager's or torch.compile's step: forward on inputs that require grad, then ``torch.autograd.grad`` of the
    outputs with the cotangents, to the floating-point inputs and the named parameters (nothing accumulates)."""
    import torch

    named = dict(module.named_parameters())
    params = [named[n] for n in names]

    def step(*inputs: Any) -> tuple[torch.Tensor, ...]:
        floats = _float_positions(inputs)
        with torch.enable_grad():
            leaves = [x.detach().requires_grad_() if i in floats else x for i, x in enumerate(inputs)]
            outs = _tensor_outputs(fn(*leaves))
            wrt = [leaves[i] for i in floats] + params
            grads = torch.autograd.grad(outs, wrt, cot.for_outputs(outs), allow_unused=True)
        return (*[o.detach() for o in outs], *_filled(grads, wrt))

    return step


def candidate_step(fn: Forward, model: torch.nn.Module, names: list[str], cot: Cotangents) -> Forward:
    """The candidate's step: its forward as the timer calls it, then ``ModelNew.backward(grads, *inputs)``, which
    returns the inputs' gradients and a dict of the parameters' gradients by name."""

    params = dict(model.named_parameters())

    def step(*inputs: Any) -> tuple[torch.Tensor, ...]:
        outs = _tensor_outputs(fn(*inputs))
        got = model.backward(tuple(cot.for_outputs(outs)), *inputs)
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], dict)):
            raise TypeError("ModelNew.backward must return (input gradients, {parameter name: gradient})")
        floats = _float_positions(inputs)
        input_grads = list(got[0])
        if len(input_grads) != len(inputs):
            raise TypeError(f"ModelNew.backward returned {len(input_grads)} input gradients for {len(inputs)} inputs")
        grads = [input_grads[i] for i in floats] + [got[1].get(n) for n in names]
        return (*[o.detach() for o in outs], *_filled(grads, [inputs[i] for i in floats] + [params[n] for n in names]))

    return step


def training_impls(impls: dict[str, Forward], reference: torch.nn.Module, candidate_model: torch.nn.Module,
                   seed: int) -> dict[str, Forward]:
    """``impls`` (eager, compiled where timed, candidate) as training steps, in the same order."""
    cot = Cotangents(seed)
    names = parameter_names(reference, candidate_model)
    return {name: candidate_step(fn, candidate_model, names, cot) if name == "candidate"
            else reference_step(fn, reference, names, cot) for name, fn in impls.items()}


def warm_compiled(compiled: Forward, reference: torch.nn.Module, sample: Callable[[], Inputs], seed: int) -> str:
    """torch.compile's backward compiled now, before any candidate code is in the process: one step of the
    compiled model under grad (its build so far was under ``no_grad``). "" when it ran, else why not."""
    import torch

    try:
        reference_step(compiled, reference, parameter_names(reference, reference), Cotangents(seed))(*sample())
        torch.cuda.synchronize()
        return ""
    except Exception as exc:  # noqa: BLE001 - the step's torch.compile time is then missing, and says why
        return f"torch.compile's backward could not be built ({type(exc).__name__}: {str(exc).strip()[:300]})"


def out_of_memory(exc: BaseException) -> str:
    """The flag of a training step that ran out of memory while it was timed."""
    return OUT_OF_MEMORY.format(error=(str(exc).splitlines() or [type(exc).__name__])[0][:200])
