"""What profiling records, apart from how it records it: a tensor argument's shape and dtype (TensorArg), one
operator's hotspot (Hotspot, hotspots.py ranks them), and the parts of a dataflow trace (trace.py records
them): a tensor read by an op (TensorRef), an ATen call (OpRecord), a module call (ModuleCall)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VIEW_OPS = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::expand", "aten::t", "aten::transpose",
    "aten::permute", "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::detach",
    "aten::alias", "aten::as_strided", "aten::_reshape_alias", "aten::lift_fresh", "aten::split",
    "aten::unbind", "aten::chunk", "aten::split_with_sizes", "aten::view_as_real", "aten::view_as_complex",
    "aten::narrow", "aten::expand_as", "aten::view_as", "aten::unflatten", "aten::flatten", "aten::diagonal",
}
FREE_OPS = VIEW_OPS | {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty"}


@dataclass
class TensorArg:
    shape: tuple[int, ...]
    dtype: str  # e.g. "torch.bfloat16"
    low: int | None = None  # integer tensors: observed range, so extracted inputs stay valid
    high: int | None = None

    def key(self) -> str:
        return f"T{list(self.shape)}:{self.dtype.removeprefix('torch.')}"


@dataclass
class Hotspot:
    op: str  # "aten::_softmax"
    overload: str  # "default"
    args: list[Any]
    kwargs: dict[str, Any]
    calls: int = 0
    total_ms: float = 0.0
    pending: list[Any] = field(default_factory=list)  # CUDA event pairs not yet read

    def signature(self) -> str:
        parts = [_describe(a) for a in self.args] + [f"{k}={_describe(v)}" for k, v in self.kwargs.items()]
        return f"{self.op}({', '.join(parts)})"


def _describe(v: Any) -> str:
    if isinstance(v, TensorArg):
        return v.key()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_describe(x) for x in v) + "]"
    return repr(v)


@dataclass
class TensorRef:
    """A tensor argument: its value id and what it looked like."""

    vid: int
    spec: TensorArg
    nbytes: int  # bytes of distinct elements (stride-0 dimensions counted once)


@dataclass
class OpRecord:
    index: int
    name: str  # "aten::add"
    overload: str  # "Tensor"
    args: list[Any]  # TensorRef where a tensor was passed, literals (or "<type>") elsewhere
    kwargs: dict[str, Any]
    outputs: list[int | None]  # value ids of the flattened result (None: not a tensor)
    out_kind: str  # "tensor" | "tuple" | "list" | "none" | "other"
    out_bytes: int
    phase: str  # "forward" | "backward" | "optimizer" (inside an optimizer's step()) | "other"
    stack: tuple[str, ...]  # module paths active (outermost first); backward: the creating module's ancestry
    step: int
    ms: float = 0.0

    def tensor_inputs(self) -> list[TensorRef]:
        out: list[TensorRef] = []
        for v in [*self.args, *self.kwargs.values()]:
            out.extend(_refs(v))
        return out

    @property
    def free(self) -> bool:
        return self.name in FREE_OPS


def _refs(v: Any) -> list[TensorRef]:
    if isinstance(v, TensorRef):
        return [v]
    if isinstance(v, list):
        return [r for x in v for r in _refs(x)]
    return []


@dataclass
class ModuleCall:
    path: str  # "layers.3.mlp" ("" for the root)
    cls: str  # "LlamaMLP"
    module_id: int
    step: int
    first_op: int  # index of the first op of its forward
    last_op: int = -1  # one past its last op
    inputs: list[tuple[str, TensorRef]] = field(default_factory=list)  # ("0", ref) positional / ("name", ref) keyword
    literals: dict[str, Any] = field(default_factory=dict)  # non-tensor arguments, "0" / "name"
    objects: dict[str, str] = field(default_factory=dict)  # arguments that are objects (a KV cache ...): their type
    output: Any = None  # structure: vid (int), None, literal repr str via ("lit", repr), tuple/list/dict of those
    output_class: str = ""  # "module:QualName" of a dict subclass the call returned (transformers' ModelOutput)
    grad: bool = False

    def signature(self) -> str:
        return ", ".join(f"{k}={r.spec.key()}" if not k.isdigit() else r.spec.key() for k, r in self.inputs)


def vids_in(structure: Any) -> list[int]:
    """The value ids in a module call's output structure (ModuleCall.output)."""
    if isinstance(structure, int):
        return [structure]
    if isinstance(structure, tuple) and len(structure) == 2 and structure[0] in ("tuple", "list", "dict"):
        items = structure[1].values() if structure[0] == "dict" else structure[1]
        return [v for item in items for v in vids_in(item)]
    return []
