"""The one-ulp sensitivity run of `kernelpilot apply`: what a kernel that rounds differently, no worse, could change.

A drop-in replaces a part of the model forward and backward, so its sensitivity run (the unmodified model, nothing
swapped) moves both by up to one unit in the last place:

- the part's outputs (``perturbed``, a forward hook on each swapped module: every floating element one ulp up, one
  down or left, at random);
- the gradients the part's backward returns (``gradient_hooks``): those of its tensor inputs (the swapped module's
  arguments, and for a chain the outputs of the holder's submodules it calls, which the chain reads) and those of
  the parameters the drop-in reads. Without these, a part whose output is the loss itself (the head and its
  cross-entropy computed in the model's forward) had a band of nothing: one ulp of a scalar loss moves no gradient,
  while the kernel returns the hidden states' and the head weight's gradients, rounded its own way.

A gradient is moved by a pattern of its element indices (up, down or left, a third each), the same every step:
traceable, so a compiled model's sensitivity run compiles as its baseline does, with no graph break.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _ulp(wide: Any, dtype: Any) -> Any:
    """The spacing of each element's binade in ``dtype`` (0 for zeros), in ``wide``'s precision."""
    import torch

    _, exponent = torch.frexp(wide)  # wide = mantissa * 2**exponent, |mantissa| in [0.5, 1)
    return torch.where(wide == 0, torch.zeros_like(wide),
                       torch.ldexp(torch.full_like(wide, torch.finfo(dtype).eps / 2), exponent))


def _each_tensor(value: Any, leaf: Any) -> Any:
    """``value`` with ``leaf`` applied to each tensor in it (tuples, named tuples, lists and plain dicts kept)."""
    import torch

    if isinstance(value, torch.Tensor):
        return leaf(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_each_tensor(v, leaf) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_each_tensor(v, leaf) for v in value)
    if type(value) is dict:
        return {k: _each_tensor(v, leaf) for k, v in value.items()}
    return value


def perturbed(value: Any, state: dict[str, Any]) -> Any:
    """``value`` with each floating tensor's elements moved one ulp up, one down, or left, at random (a third
    each; the ulp is the spacing of the element's binade, 0 for zeros). A generator of its own (seeded)
    leaves the script's random draws alone."""
    import torch

    def one(tensor: Any) -> Any:
        if not tensor.is_floating_point():
            return tensor
        gens = state.setdefault("generators", {})
        if tensor.device not in gens:
            gens[tensor.device] = torch.Generator(device=tensor.device).manual_seed(20261203)
        wide = tensor.double() if tensor.dtype == torch.float64 else tensor.float()
        step = torch.randint(-1, 2, tensor.shape, generator=gens[tensor.device], device=tensor.device).to(wide.dtype)
        return (wide + step * _ulp(wide, tensor.dtype)).to(tensor.dtype)

    return _each_tensor(value, one)


def moved(grad: Any) -> Any:
    """``grad`` with each element moved one ulp up, one down or left, by its index (the same pattern each call)."""
    import torch

    if grad is None or not grad.is_floating_point():
        return grad
    wide = grad.double() if grad.dtype == torch.float64 else grad.float()
    index = torch.arange(grad.numel(), device=grad.device).reshape(grad.shape)
    step = (index * 2654435761 % 3 - 1).to(wide.dtype)  # Knuth's multiplicative hash: up, down, left
    return (wide + step * _ulp(wide, grad.dtype)).to(grad.dtype)


def _grad_moved() -> Any:
    import torch

    class GradMoved(torch.autograd.Function):
        """The identity forward; its backward moves the gradient by up to one ulp (``moved``)."""

        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return moved(grad)

    return GradMoved


_GRAD_MOVED: Any = None


def through(value: Any) -> Any:
    """``value`` with every floating tensor that requires grad passed through ``GradMoved`` (structures kept)."""

    def one(tensor: Any) -> Any:
        global _GRAD_MOVED
        if not (tensor.is_floating_point() and tensor.requires_grad):
            return tensor
        if _GRAD_MOVED is None:
            _GRAD_MOVED = _grad_moved()
        return _GRAD_MOVED.apply(tensor)

    return _each_tensor(value, one)


def gradient_hooks(model: Any, dropin: Path) -> list[Any]:
    """Hooks on ``model`` (unmodified) that move by up to one ulp the gradients ``dropin``'s part returns: of the
    swapped modules' tensor arguments, of the outputs of the submodules a chain's holder calls, and of the
    parameters the drop-in reads (each parameter hooked once). Returns the handles (``.remove()``)."""
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    spec = origin if origin.get("kind") == "module" else origin.get("holder") or {}
    handles: list[Any] = []
    hooked: set[int] = set()
    for path in origin.get("paths") or [origin.get("path", "")]:
        module = model.get_submodule(path) if path else model
        handles.append(module.register_forward_pre_hook(
            lambda m, args, kwargs: (through(args), through(kwargs)), with_kwargs=True))
        for rel in (spec.get("modules") or {}).values():
            handles.append(module.get_submodule(rel).register_forward_hook(lambda m, i, o: through(o)))
        base = model if spec.get("script_loss") else module  # a head whose loss is in the script: named under the root
        for name in (origin.get("params") or {}).values():
            owner, local = (model, name[len("model:"):]) if name.startswith("model:") else (base, name)
            try:
                tensor = owner.get_parameter(local)
            except AttributeError:
                continue  # a buffer: no gradient
            if id(tensor) not in hooked and tensor.requires_grad:
                hooked.add(id(tensor))
                handles.append(tensor.register_hook(moved))
    return handles
