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

A gradient is moved by a hash of each element's index and value (up, down or left, a third each), the same for the
same gradient: traceable, so a compiled model's sensitivity run compiles as its baseline does, with no graph break.
An output is moved at random in eager, and by such a hash (another salt) where torch.compile traces it (a hook on a
module inside the compiled forward). The ulp is read from the exponent bits (no frexp/ldexp). On an H100
(2026-12-07) the per-module sensitivity run under torch.compile failed in Inductor's kernel compilation; the
model-level one, whose hooks run outside the compiled forward, passed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _ulp(wide: Any, dtype: Any) -> Any:
    """The spacing of each element's binade in ``dtype``, in ``wide``'s precision (float32 or float64): 0 for zeros,
    for ``wide``'s subnormals and for infinities and NaNs. The binade's power of two is the element with its sign
    and mantissa bits cleared (a bitcast and a mask, which every backend compiles)."""
    import torch

    bits, mask = (torch.int64, 0x7FF0000000000000) if wide.dtype == torch.float64 else (torch.int32, 0x7F800000)
    binade = (wide.view(bits) & mask).view(wide.dtype)  # 2**floor(log2|x|)
    return torch.where(torch.isfinite(wide), binade * torch.finfo(dtype).eps, torch.zeros_like(wide))


def _pattern(wide: Any, salt: int) -> Any:
    """-1, 0 or +1 per element of ``wide`` (float32 or float64; a third each) from a hash of its index and the bits
    of its value: the same input moves alike on every call, tensors of one shape (a layer's and the next's) move
    unalike, and it traces (integer arithmetic only; ``salt`` below 2**30 keeps it inside int64)."""
    import torch

    bits = wide.view(torch.int64 if wide.dtype == torch.float64 else torch.int32).to(torch.int64)
    low = (bits ^ (bits >> 32)) & 0xFFFFFFFF
    index = torch.arange(wide.numel(), device=wide.device).reshape(wide.shape)
    mixed = low * salt + index * 40503
    return (mixed ^ (mixed >> 17)) % 3 - 1


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
        wide = tensor.double() if tensor.dtype == torch.float64 else tensor.float()
        if torch.compiler.is_compiling():  # traced: no generator (its state is not part of a graph)
            step = _pattern(wide, 0x2545F491).to(wide.dtype)
        else:
            gens = state.setdefault("generators", {})
            if tensor.device not in gens:
                gens[tensor.device] = torch.Generator(device=tensor.device).manual_seed(20261203)
            step = torch.randint(-1, 2, tensor.shape, generator=gens[tensor.device],
                                 device=tensor.device).to(wide.dtype)
        return (wide + step * _ulp(wide, tensor.dtype)).to(tensor.dtype)

    return _each_tensor(value, one)


def moved(grad: Any) -> Any:
    """``grad`` with each element moved one ulp up, one down or left, by a hash of its index and value (the same
    gradient moves alike on every call)."""
    import torch

    if grad is None or not grad.is_floating_point():
        return grad
    wide = grad.double() if grad.dtype == torch.float64 else grad.float()
    step = _pattern(wide, 0x1B873593).to(wide.dtype)  # up, down or left
    return (wide + step * _ulp(wide, grad.dtype)).to(grad.dtype)


_GRAD_MOVED: Any = None


def _grad_moved_class() -> Any:
    """``GradMoved``, made once; ``gradient_hooks`` makes it before any run, because Dynamo does not trace a class
    statement (a hook traced inside a compiled forward would break the graph there)."""
    global _GRAD_MOVED
    if _GRAD_MOVED is None:
        import torch

        class GradMoved(torch.autograd.Function):
            """The identity forward; its backward moves the gradient by up to one ulp (``moved``)."""

            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x.view_as(x)

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return moved(grad)

        _GRAD_MOVED = GradMoved
    return _GRAD_MOVED


def through(value: Any) -> Any:
    """``value`` with every floating tensor that requires grad passed through ``GradMoved`` (structures kept)."""

    def one(tensor: Any) -> Any:
        if not (tensor.is_floating_point() and tensor.requires_grad):
            return tensor
        return _grad_moved_class().apply(tensor)

    return _each_tensor(value, one)


def gradient_hooks(model: Any, dropin: Path) -> list[Any]:
    """Hooks on ``model`` (unmodified) that move by up to one ulp the gradients ``dropin``'s part returns: of the
    swapped modules' tensor arguments, of the outputs of the submodules a chain's holder calls, and of the
    parameters the drop-in reads (each parameter hooked once). Returns the handles (``.remove()``)."""
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    _grad_moved_class()  # now, outside any trace
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
