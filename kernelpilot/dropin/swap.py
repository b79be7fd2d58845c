"""Swap a drop-in operator into a model at its recorded module paths (copied beside each approved
candidate as ``dropin_swap.py``: it imports torch only, never kernelpilot).

- a **module**: its ``forward`` is replaced by one that calls the operator on the call's tensor
  arguments and the module's parameters and rebuilds the recorded result (tuple, dict, None ...);
- a **chain**: the forward of the module holding it is replaced by the recorded forward of that
  module (``holder.py``) with the chain's calls replaced by the operator.

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
    for path in paths or origin.get("paths") or [origin["path"]]:
        module = model.get_submodule(path) if path else model
        if type(module).__name__ != spec["class"]:
            raise ValueError(f"model.{path} is a {type(module).__name__}, not the {spec['class']} the kernel was "
                             "extracted from.")
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
        return rebuild(spec["output"], outs)

    forward.kernelpilot_stats = stats  # type: ignore[attr-defined]
    forward.kernelpilot_original = original  # type: ignore[attr-defined]
    return forward


def uninstall(model: Any) -> None:
    for module in model.modules():
        original = getattr(module.__dict__.get("forward"), "kernelpilot_original", None)
        if original is not None:
            del module.forward
