"""Swap a drop-in operator into a model at its recorded module paths (copied beside each approved
candidate as ``dropin_swap.py``: it imports torch only, never kernelpilot).

- a **module**: its ``forward`` is replaced by one that calls the operator on the call's tensor
  arguments and the module's parameters and rebuilds the recorded result (tuple, dict, None ...);
- a **chain**: the forward of the module holding it is replaced by the recorded forward of that
  module (``holder.py``) with the chain's calls replaced by the operator;
- a **head and loss computed in the script**: the head's forward returns deferred logits, and the
  script's cross-entropy of them runs the operator (``DeferredLogits``).

A call whose tensor arguments do not have a recorded shape and dtype (or whose other arguments
differ) runs the original forward; ``forward.kernelpilot_stats`` counts both in eager calls, and marks
(``compiled_kernel`` / ``compiled_original``) which one torch.compile traced into its graph: a count
read and written in traced code is a value Dynamo guards on, so counting there recompiled the whole
compiled forward at every call until Dynamo gave up and ran it eagerly.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any


_MISSING = object()


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], key: str) -> Any:
    """The argument at a recorded key: ``"0"`` positional, ``"name"`` keyword, ``"name.1"`` (or
    ``"name.key"``) an item of a tuple, list or dict argument."""
    head, *rest = key.split(".")
    value: Any = args[int(head)] if head.isdigit() and int(head) < len(args) else kwargs.get(head, _MISSING)
    for part in rest:
        if isinstance(value, dict):
            value = value.get(part, _MISSING)
        elif isinstance(value, (tuple, list)) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _tensor_args(args: tuple[Any, ...], kwargs: dict[str, Any], spec: dict[str, Any]) -> list[Any] | None:
    import torch

    out = []
    for key in spec["arguments"]:
        value = _argument(args, kwargs, key)
        if not isinstance(value, torch.Tensor):
            return None
        out.append(value)
    for key, literal in spec.get("literals", {}).items():
        value = _argument(args, kwargs, key)
        if value is _MISSING:
            value = None  # an argument left at its default of None was recorded as None
        if value != literal:
            return None
    if any(any(out[i] is not out[group[0]] for i in group) for group in spec.get("aliases", [])):
        return None  # one tensor when recorded (labels=input_ids), read by one name in the replay
    shapes = [list(t.shape) for t in out]
    dtypes = [str(t.dtype) for t in out]
    if dtypes != spec["dtypes"] or not any(shapes == s[: len(shapes)] for s in spec["shapes"]):
        return None
    return out


def rebuild(structure: Any, outs: tuple[Any, ...]) -> Any:
    if "out" in structure:
        return outs[structure["out"]]
    if "lit" in structure:
        return None if structure["lit"] == "None" else eval(structure["lit"], {})  # noqa: S307 - repr of a literal
    if "dict" in structure:
        return {k: rebuild(v, outs) for k, v in structure["dict"].items()}
    if "tuple" in structure:
        return tuple(rebuild(v, outs) for v in structure["tuple"])
    return [rebuild(v, outs) for v in structure["list"]]


def _output_class(name: str) -> Any:
    """The dict subclass the recorded forward returned (transformers' ModelOutput: ``out.loss`` must still work)."""
    import importlib

    module, _, qualname = name.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _targets(model: Any, paths: list[str], cls: str) -> list[tuple[str, Any]]:
    """The modules at ``paths``, each checked to be of the class the kernel was extracted from."""
    out = []
    for path in paths:
        module = model.get_submodule(path) if path else model
        if type(module).__name__ != cls:
            raise ValueError(f"model.{path} is a {type(module).__name__}, not the {cls} the kernel was extracted "
                             "from.")
        out.append((path, module))
    return out


def _resolve(model: Any, module: Any, local: str) -> Any:
    if local.startswith("model:"):
        owner, name = model, local[len("model:"):]
    else:
        owner, name = module, local
    try:
        return owner.get_parameter(name)
    except AttributeError:
        return owner.get_buffer(name)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def install(model: Any, op: Any, origin: dict[str, Any], params: list[str], problem_dir: Path,
            paths: list[str] | None = None) -> list[str]:
    """Swap ``op`` in at ``paths`` (default: every recorded path); returns the paths swapped."""
    kind = origin.get("kind")
    if kind not in ("module", "chain"):
        raise ValueError(f"{problem_dir}/origin.json names no module or chain; this kernel was not extracted from a "
                         "model.")
    if kind == "module" and origin.get("externals"):
        raise ValueError(f"model.{origin['path']} reads tensors that are neither its arguments nor its parameters; "
                         f"it cannot be swapped.")
    if kind == "module" and origin.get("objects"):
        objects = ", ".join(f"{k}=<{v}>" for k, v in origin["objects"].items())
        raise ValueError(f"model.{origin['path']} is called with {objects}, which a swapped forward would neither read "
                         f"nor update; it cannot be swapped.")
    if kind == "chain" and "holder" not in origin:
        raise ValueError(origin.get("holder_error")
                         or f"{problem_dir}/origin.json records no module holding the chain; "
                         f"it cannot be swapped.")
    spec = origin if kind == "module" else origin["holder"]
    if spec.get("script_loss"):
        return _defer_head(model, op, origin, params, paths)
    holder_forward = None
    if kind == "chain":
        name = "kp_holder_" + re.sub(r"\W", "_", problem_dir.resolve().name)
        loader = importlib.util.spec_from_file_location(name, problem_dir / "holder.py")
        assert loader is not None and loader.loader is not None
        holder = importlib.util.module_from_spec(loader)
        sys.modules[name] = holder  # torch.compile imports a traced function's module by its name
        loader.loader.exec_module(holder)
        holder_forward = holder.forward
    swapped = []
    for path, module in _targets(model, paths or origin.get("paths") or [origin["path"]], spec["class"]):
        own = [_resolve(model, module, origin["params"][a]) for a in params]
        holder_params = SimpleNamespace(**{a: _resolve(model, module, n) for a, n in spec.get("params", {}).items()},
                                        **{a: module.get_submodule(rel) for a, rel in spec.get("modules", {}).items()})
        module.forward = _forward(module, module.forward, op, spec, own, holder_forward, holder_params)
        swapped.append(path)
    return swapped


def _forward(module: Any, original: Any, op: Any, spec: dict[str, Any], params: list[Any], holder_forward: Any,
             holder_params: Any) -> Any:
    import torch

    stats = {"kernel": 0, "original": 0, "compiled_kernel": 0, "compiled_original": 0}

    def count(path: str) -> None:
        if torch.compiler.is_compiling():
            stats["compiled_" + path] = 1  # written, never read: no guard on it
        else:
            stats[path] += 1

    def kernel(*tensors: Any) -> tuple[Any, ...]:
        return _as_tuple(op(*tensors))

    # found here, once: an import inside the swapped forward would break torch.compile's graph at every call
    output_class = _output_class(spec["output_class"]) if spec.get("output_class") else None

    def forward(*args: Any, **kwargs: Any) -> Any:
        tensors = _tensor_args(args, kwargs, spec)
        if tensors is None:
            count("original")
            return original(*args, **kwargs)
        count("kernel")
        if holder_forward is None:
            outs = kernel(*tensors, *params)
        else:
            outs = _as_tuple(holder_forward(holder_params, kernel, *tensors))
        result = rebuild(spec["output"], outs)
        return output_class(**result) if output_class is not None else result

    forward.kernelpilot_stats = stats  # type: ignore[attr-defined]
    forward.kernelpilot_original = original  # type: ignore[attr-defined]
    return forward


def uninstall(model: Any) -> None:
    for module in model.modules():
        original = getattr(module.__dict__.get("forward"), "kernelpilot_original", None)
        if original is not None:
            del module.forward


# ---- a head and loss computed in the script -------------------------------------------------------------------


def _defer_head(model: Any, op: Any, origin: dict[str, Any], params: list[str], paths: list[str] | None) -> list[str]:
    """The head's forward returns DeferredLogits (on a call of a recorded shape; eagerly under torch.compile);
    the script's ``F.cross_entropy`` of them (after views and an upcast) runs ``op`` on the hidden states, the
    labels and the weight. Anything else the script does with them makes the logits (counted as original)."""
    import torch

    spec = origin["holder"]
    weights = [_resolve(model, model, origin["params"][a]) for a in params]  # named under the root
    swapped = []
    for path, module in _targets(model, paths or origin.get("paths") or [spec["path"]], spec["class"]):
        original = module.forward
        stats = {"kernel": 0, "original": 0, "compiled_kernel": 0, "compiled_original": 0}

        def forward(*args: Any, _original: Any = original, _weights: Any = weights, _stats: Any = stats,
                    **kwargs: Any) -> Any:
            tensors = _tensor_args(args, kwargs, spec)
            if tensors is None:
                _stats["original"] += 1
                return _original(*args, **kwargs)
            rows = tuple(tensors[0].shape[:-1])
            classes = int(origin["classes"])
            return DeferredLogits(tensors[0], _weights, rows + (classes,), _original, args, kwargs, op, origin,
                                  _stats)

        # run eagerly under torch.compile: Dynamo cannot make a tensor subclass inside a graph, so a compiled
        # model breaks its graph here, at the head (a forward's last call), and the script's loss runs the kernel
        deferred = torch.compiler.disable(forward)
        deferred.kernelpilot_stats = stats  # type: ignore[attr-defined]
        deferred.kernelpilot_original = original  # type: ignore[attr-defined]
        module.forward = deferred
        swapped.append(path)
    return swapped


def _deferred_type() -> Any:
    import torch
    import torch.nn.functional as F

    metadata = {"shape", "dtype", "device", "requires_grad", "ndim", "is_cuda", "layout", "is_leaf", "grad_fn"}

    class Deferred(torch.Tensor):
        """The head's logits, not made: views that keep the vocabulary last and an upcast are noted; the
        cross-entropy of them runs the kernel; anything else makes them with the original head first."""

        @staticmethod
        def __new__(cls, hidden: Any, weights: Any, shape: tuple[int, ...], head: Any, args: Any, kwargs: Any,
                    op: Any, origin: dict[str, Any], stats: dict[str, int], dtype: Any = None) -> Any:
            dtype = dtype or getattr(torch, origin["holder"]["dtypes"][0].removeprefix("torch."))
            made = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype, device=hidden.device,
                                                       requires_grad=False)
            made._kp = (hidden, weights, head, args, kwargs, op, origin, stats)
            return made

        def __repr__(self) -> str:  # type: ignore[override]
            return f"DeferredLogits(shape={tuple(self.shape)}, dtype={self.dtype})"

        def _again(self, shape: Any, dtype: Any) -> Any:
            return Deferred(*self._kp[:2], tuple(shape), *self._kp[2:], dtype=dtype)

        def made(self) -> Any:
            _, _, head, args, kwargs, _, _, stats = self._kp
            stats["original"] += 1
            return head(*args, **kwargs).reshape(self.shape).to(self.dtype)

        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            me = args[0] if args and isinstance(args[0], Deferred) else None
            name = getattr(func, "__name__", "")
            if me is not None and name == "__get__" and getattr(func.__self__, "__name__", "") in metadata:
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **kwargs)
            if me is not None and name in ("size", "dim", "numel", "element_size", "is_contiguous", "contiguous"):
                if name == "contiguous":
                    return me
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **kwargs)
            if me is not None and name in ("view", "reshape") and not kwargs:
                shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
                if all(isinstance(d, int) for d in shape):
                    new = torch.empty(me.shape, device="meta").reshape(*shape).shape
                    if new and new[-1] == me.shape[-1]:
                        return me._again(new, me.dtype)
            if me is not None and name == "float" and len(args) == 1 and not kwargs:
                return me._again(me.shape, torch.float32)
            if me is not None and name == "to" and len(args) == 2 and isinstance(args[1], torch.dtype):
                return me._again(me.shape, args[1])
            # by name: F.cross_entropy may be wrapped (apply --compile compiles it), the function given here is not
            if me is not None and getattr(func, "__module__", "") == F.__name__ and name == "cross_entropy":
                fused = me._cross_entropy(*args[1:], **kwargs)
                if fused is not None:
                    return fused
            flat = [a.made() if isinstance(a, Deferred) else a for a in args]
            return func(*flat, **{k: v.made() if isinstance(v, Deferred) else v for k, v in kwargs.items()})

        @classmethod
        def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            raise RuntimeError(f"{func} reached deferred logits below autograd; please report it to kernelpilot")

        def _cross_entropy(self, target: Any, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                           reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
            hidden, weights, head, args, kwargs, op, origin, stats = self._kp
            spec = origin["holder"]
            if (weight is not None or size_average is not None or reduce is not None or label_smoothing
                    or ignore_index != origin["ignore_index"] or reduction != origin["reduction"]
                    or not isinstance(target, torch.Tensor) or list(target.shape) != spec["labels_shape"]
                    or str(target.dtype) != spec["labels_dtype"] or str(self.dtype) != spec["logits_dtype"]
                    or self.dim() != 2):
                return None
            stats["kernel"] += 1
            out = op(hidden, target, *weights)
            return out[0] if isinstance(out, (tuple, list)) else out

    return Deferred


def DeferredLogits(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - stands for the class, made once
    global _DEFERRED
    if _DEFERRED is None:
        _DEFERRED = _deferred_type()
    return _DEFERRED(*args, **kwargs)


_DEFERRED: Any = None
