"""Eager PyTorch calls recorded at the torch-function level, written back as Python source.

trace.py records every top-level torch call (``torch.nn.functional.instance_norm(t, ...)``,
``t.squeeze(1)``, ``t[:, -1, :]``, ``torch.lstm(x, (h0, c0), [weights], ...)``) that runs outside
dynamo's graphs, with the objects it took and returned. ``Names`` gives every tensor a name in the
candidate's forward (a forward argument, ``self.fc.weight``, a graph's output ``g0[1]``, an earlier
call's result ``v3``); ``render_call`` writes one call with its arguments as those names and as
literals (ints, floats, slices, dtypes; a device is the forward's ``device``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.inductor.helpers import ConversionError

_BINARY = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__matmul__": "@", "__pow__": "**",
           "__floordiv__": "//", "__mod__": "%", "__and__": "&", "__or__": "|", "__xor__": "^", "__lt__": "<",
           "__le__": "<=", "__gt__": ">", "__ge__": ">=", "__eq__": "==", "__ne__": "!="}
_REFLECTED = {"__radd__": "+", "__rsub__": "-", "__rmul__": "*", "__rtruediv__": "/", "__rmatmul__": "@",
              "__rpow__": "**", "__rfloordiv__": "//"}


@dataclass
class Call:
    """One recorded top-level torch call."""

    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any
    aten: list[str] = field(default_factory=list)  # compute ATen operators it ran (packet names)

    @property
    def name(self) -> str:
        if getattr(self.func, "__name__", "") == "__get__" and hasattr(self.func, "__self__"):
            return str(getattr(self.func.__self__, "__name__", "attribute"))
        return str(getattr(self.func, "__name__", self.func))

    @property
    def mutates(self) -> bool:
        """In place (``add_``, ``copy_``, ``__setitem__``, ``out=``): kept even when its result is unused."""
        name = self.name
        return "out" in self.kwargs or name == "__setitem__" or (name.endswith("_") and not name.endswith("__")) \
            or name.startswith("__i")


class Names:
    """id(tensor) -> expression in the candidate's forward; the objects are held so ids stay unique."""

    def __init__(self) -> None:
        self.exprs: dict[int, str] = {}
        self.held: list[Any] = []

    def bind(self, value: Any, expr: str) -> None:
        """Name ``value`` and every tensor inside it (tuples and lists by index)."""
        import torch

        if isinstance(value, torch.Tensor):
            self.exprs.setdefault(id(value), expr)
            self.held.append(value)
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                self.bind(item, f"{expr}[{i}]")

    def has(self, value: Any) -> bool:
        return id(value) in self.exprs

    def expr(self, value: Any) -> str:
        """A value as source: a named tensor, or a literal."""
        import torch

        if isinstance(value, torch.Tensor):
            if id(value) not in self.exprs:
                raise ConversionError(f"the eager code between torch.compile's graphs uses a {tuple(value.shape)} "
                                      "tensor that is neither an input, a parameter, a graph's output nor the result "
                                      "of an earlier call: it cannot be written as a candidate.")
            return self.exprs[id(value)]
        if isinstance(value, torch.Size):
            return repr(tuple(value))
        if isinstance(value, tuple):
            return "(" + "".join(f"{self.expr(v)}, " for v in value).rstrip(" ") + ")" if value else "()"
        if isinstance(value, list):
            return "[" + ", ".join(self.expr(v) for v in value) + "]"
        if isinstance(value, slice):
            return f"slice({self.expr(value.start)}, {self.expr(value.stop)}, {self.expr(value.step)})"
        if value is Ellipsis:
            return "..."
        if isinstance(value, float) and not math.isfinite(value):
            return f"float({str(value)!r})"
        if value is None or isinstance(value, (bool, int, float, str, complex)):
            return repr(value)
        if isinstance(value, torch.dtype) or isinstance(value, (torch.memory_format, torch.layout)):
            return str(value)
        if isinstance(value, torch.device):
            return "torch.device('cpu')" if value.type == "cpu" else "device"
        raise ConversionError(f"the eager code between torch.compile's graphs passes a {type(value).__name__} to a "
                              "torch call; only tensors, numbers, slices, dtypes and devices can be written back.")

    def index(self, value: Any) -> str:
        """A subscript: ``:, -1, :`` for ``(slice(None), -1, slice(None))``."""
        items = value if isinstance(value, tuple) else (value,)
        parts = []
        for item in items:
            if isinstance(item, slice):
                text = ":".join("" if v is None else self.expr(v) for v in (item.start, item.stop))
                parts.append(text + (f":{self.expr(item.step)}" if item.step is not None else ""))
            else:
                parts.append(self.expr(item))
        return ", ".join(parts) if isinstance(value, tuple) and len(items) != 1 else parts[0] + (
            "," if isinstance(value, tuple) else "")


def function_expr(func: Any) -> str:
    """A public spelling of a torch function: ``torch.nn.functional.linear`` for ``torch._C._nn.linear``."""
    import torch
    import torch.nn.functional as F

    name = getattr(func, "__name__", "")
    for prefix, namespace in (("torch", torch), ("torch.nn.functional", F), ("torch.special", torch.special),
                              ("torch.linalg", torch.linalg), ("torch.fft", torch.fft)):
        if name and getattr(namespace, name, None) is func:
            return f"{prefix}.{name}"
    raise ConversionError(f"the eager code between torch.compile's graphs calls {name or func!r}, which has no "
                          "public torch name; it cannot be written back as a candidate.")


def _is_method(func: Any) -> bool:
    import torch

    owner = getattr(func, "__objclass__", None)
    qualname = getattr(func, "__qualname__", "")
    return owner in (torch.Tensor, torch._C.TensorBase) or qualname.startswith(("Tensor.", "TensorBase."))


def render_call(call: Call, names: Names) -> str:
    """The right-hand side (or, for ``__setitem__``, the whole statement) of one recorded call."""
    func, args, kwargs = call.func, list(call.args), call.kwargs
    if getattr(func, "__name__", "") == "__get__" and hasattr(func, "__self__"):
        return f"{names.expr(args[0])}.{call.name}"
    kw = [f"{k}={names.expr(v)}" for k, v in kwargs.items()]
    if _is_method(func):
        name, this, rest = call.name, names.expr(args[0]), args[1:]
        if name == "__getitem__":
            return f"{this}[{names.index(rest[0])}]"
        if name == "__setitem__":
            return f"{this}[{names.index(rest[0])}] = {names.expr(rest[1])}"
        if name in _BINARY and not kw:
            return f"{this} {_BINARY[name]} {names.expr(rest[0])}"
        if name in _REFLECTED and not kw:
            return f"{names.expr(rest[0])} {_REFLECTED[name]} {this}"
        if name == "__neg__":
            return f"-{this}"
        return f"{this}.{name}({', '.join([names.expr(a) for a in rest] + kw)})"
    return f"{function_expr(func)}({', '.join([names.expr(a) for a in args] + kw)})"
