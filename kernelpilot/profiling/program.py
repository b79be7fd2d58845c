"""A slice of a trace as straight-line Python: the ATen calls that ran, in order, on named values.

``Program`` renders the forward body of an extracted problem (or of a patched module forward):
every recorded ATen call becomes ``torch.ops.aten.<op>.<overload>(...)`` on the values it read;
tensors the slice reads but neither receives as an input nor makes are *externals* (parameters and
buffers of the root become attributes, anything else another forward input); non-tensor arguments
are literals, devices become the device of the first input.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.records import OpRecord, TensorRef
from kernelpilot.profiling.trace import Trace


def full_name(scope: str, local: str) -> str:
    """A parameter's dotted name under the model from its name in a Program of module ``scope``."""
    if local.startswith("model:"):
        return local[len("model:"):]
    return f"{scope}.{local}" if scope else local


def attr_name(param: str) -> str:
    return "p_" + re.sub(r"\W", "_", param)


@dataclass
class Program:
    """Python source for ``ops`` reading ``inputs`` (value ids, in argument order)."""

    trace: Trace
    ops: list[OpRecord]
    inputs: list[int]
    outputs: list[int]
    names: dict[int, str] = field(default_factory=dict)
    externals: list[TensorRef] = field(default_factory=list)  # extra forward inputs, in order
    external_readers: list[str] = field(default_factory=list)  # per external, the first call that read it
    params: dict[str, TensorRef] = field(default_factory=dict)  # attribute -> parameter/buffer read
    param_names: dict[str, str] = field(default_factory=dict)  # attribute -> dotted name under the root
    lines: list[str] = field(default_factory=list)
    scope: str = ""  # parameters under this module path are named relative to it ("model:" + full name otherwise)
    absent: set[int] = field(default_factory=set)  # values a patched forward returns as None (a head's logits)
    _count: int = 0

    def _new(self, vid: int) -> str:
        self._count += 1
        self.names[vid] = f"v{self._count}"
        return self.names[vid]

    def render(self, *, self_name: str = "self", replace: dict[int, tuple[list[int], Any]] | None = None) -> list[str]:
        """Forward body lines. ``replace``: op index -> (value ids it should output, a call expression
        standing for a run of ops starting there, or a function of this program and ``self_name`` that
        writes it when the values it reads have their names; the run's other ops are skipped by the
        caller). With no values to output, the expression is a statement."""
        self.lines = []
        for i, vid in enumerate(self.inputs):
            self.names.setdefault(vid, f"x{i}")
        device = None
        for op in self.ops:
            if replace and op.index in replace:
                outs, expr = replace[op.index]
                if callable(expr):
                    expr = expr(self, self_name)
                self.lines.append(f"{self._targets(outs)} = {expr}" if outs else expr)
                continue
            call = self._call(op, self_name)
            if device is None and "__device__" in call:
                device = self._first_tensor(self_name)
            call = call.replace("__device__", "_dev")
            target = self._assign(op)
            self.lines.append(f"{target} = {call}" if target else call)
        if device is not None:
            self.lines.insert(0, f"_dev = {device}.device")
        return self.lines

    def returns(self) -> str:
        names = [self.value(v, "self") for v in self.outputs]
        return names[0] if len(names) == 1 else "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"

    # ---- names -----------------------------------------------------------------------------------
    def value(self, vid: int, self_name: str) -> str:
        if vid in self.absent:
            return "None"
        if vid in self.names:
            return self.names[vid]
        name = self.trace.params.get(vid)
        if name is not None:
            prefix = f"{self.scope}." if self.scope else ""
            local = name[len(prefix):] if name.startswith(prefix) else "model:" + name
            attr = attr_name(local.replace("model:", "model_"))
            self.params[attr] = self.trace.param_specs[name]
            self.param_names[attr] = local
            return f"{self_name}.{attr}"
        raise KeyError(vid)

    def _tensor(self, ref: TensorRef, op: OpRecord, self_name: str) -> str:
        try:
            return self.value(ref.vid, self_name)
        except KeyError:
            constant = self.trace.constants.get(ref.vid)
            if constant is not None:  # torch.tensor(<Python data>) in the forward: made again, on the inputs' device
                value, dtype = constant
                return f"torch.tensor({value!r}, dtype={dtype}, device=__device__)"
            name = f"e{len(self.externals)}"
            self.externals.append(ref)
            where = op.stack[-1] if op.stack else ""
            self.external_readers.append(f"T{list(ref.spec.shape)}:{str(ref.spec.dtype).removeprefix('torch.')} read "
                                         f"by {op.name} in model{'.' + where if where else ''}")
            self.names[ref.vid] = name
            return name

    def _first_tensor(self, self_name: str) -> str:
        if self.inputs:
            return self.names[self.inputs[0]]
        if self.externals:
            return self.names[self.externals[0].vid]
        if self.params:
            return f"{self_name}.{next(iter(self.params))}"
        return "torch.empty(0)"

    def _targets(self, outs: list[int]) -> str:
        return ", ".join(self._new(v) for v in outs) + ("," if len(outs) == 1 else "")

    def _assign(self, op: OpRecord) -> str:
        if op.out_kind == "tensor":
            vid = op.outputs[0]
            assert vid is not None
            return self._new(vid)
        if op.out_kind in ("tuple", "list"):
            parts = []
            for v in op.outputs:
                if v is None:
                    parts.append("_")
                else:
                    parts.append(self._new(v))
            if not parts:
                return ""
            return ", ".join(parts) + ("," if len(parts) == 1 else "")
        return ""

    def _call(self, op: OpRecord, self_name: str) -> str:
        args = [self._literal(a, op, self_name) for a in op.args]
        kwargs = [f"{k}={self._literal(v, op, self_name)}" for k, v in op.kwargs.items()]
        namespace, name = op.name.split("::", 1)
        return f"torch.ops.{namespace}.{name}.{op.overload}({', '.join(args + kwargs)})"

    def _literal(self, v: Any, op: OpRecord, self_name: str) -> str:
        import torch

        if isinstance(v, TensorRef):
            return self._tensor(v, op, self_name)
        if isinstance(v, list):
            return "[" + ", ".join(self._literal(x, op, self_name) for x in v) + "]"
        if isinstance(v, torch.device):
            return "__device__"
        if isinstance(v, str) and v.startswith("<") and v.endswith(">"):
            raise KernelpilotError(f"{op.name} takes an argument of type {v[1:-1]}, which cannot be written as a "
                                   f"literal; pick another hotspot.")
        if isinstance(v, float) and not math.isfinite(v):
            return f"float({str(v)!r})"
        return repr(v)


def tensor_maker(spec: Any) -> str:
    shape = ", ".join(str(d) for d in spec.shape) + ("," if len(spec.shape) == 1 else "")
    if spec.dtype == "torch.bool":
        return f"torch.rand(({shape})) > 0.5"
    if spec.low is not None and spec.high is not None:
        return f"torch.randint({spec.low}, {spec.high + 1}, ({shape}), dtype={spec.dtype})"
    if not spec.dtype.startswith(("torch.float", "torch.bfloat", "torch.half", "torch.complex")):
        return f"torch.zeros(({shape}), dtype={spec.dtype})"
    return f"torch.randn(({shape}), dtype={spec.dtype})"


def param_maker(name: str, spec: Any) -> str:
    """A plausible random value for a parameter of this name and shape (the real ones: --weights)."""
    shape = ", ".join(str(d) for d in spec.shape) + ("," if len(spec.shape) == 1 else "")
    if not spec.dtype.startswith(("torch.float", "torch.bfloat", "torch.half")):
        return tensor_maker(spec)
    if len(spec.shape) >= 2:
        return f"torch.randn(({shape}), dtype={spec.dtype}) / {math.sqrt(max(spec.shape[-1], 1)):.4g}"
    if name.endswith("weight"):
        return f"1 + 0.1 * torch.randn(({shape}), dtype={spec.dtype})"
    return f"0.1 * torch.randn(({shape}), dtype={spec.dtype})"
