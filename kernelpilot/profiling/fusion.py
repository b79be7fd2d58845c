"""`hotspots --group fusion`: chains of consecutive operators on the same data one fused kernel could replace.

A chain starts at a pointwise, reduction or matmul call of one forward and grows while the next
call (metadata-only views of other data are stepped over) is pointwise or a reduction and reads a
value the chain made. A matmul only starts a chain (a matmul and its epilogue). Per chain:

- **unfused bytes**: what each call reads and writes, summed;
- **fused bytes**: what one kernel must read (the chain's inputs, once) and write (its result, and
  every intermediate that is *used outside* the chain or *saved for backward*: those are marked,
  they limit the fusion);
- **compiled**: whether torch.compile already makes the chain one kernel, decided by compiling the
  extracted chain with Inductor and counting the kernels it generates (matmuls are library calls and
  not counted); skipped on the CPU unless asked, since Inductor's C++ backend fuses differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelpilot.profiling.records import VIEW_OPS, OpRecord, TensorRef
from kernelpilot.profiling.trace import Trace

MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
              "aten::convolution", "aten::_convolution"}
REDUCTION_OPS = {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min", "aten::var",
                 "aten::var_mean", "aten::std", "aten::std_mean", "aten::_softmax", "aten::_log_softmax",
                 "aten::native_layer_norm", "aten::norm", "aten::linalg_vector_norm", "aten::logsumexp",
                 "aten::prod", "aten::argmax", "aten::argmin", "aten::native_group_norm", "aten::native_batch_norm",
                 "aten::_native_batch_norm_legit_functional", "aten::_native_batch_norm_legit_no_training"}
POINTWISE_EXTRA = {"aten::_to_copy", "aten::clone", "aten::copy_", "aten::where", "aten::masked_fill",
                   "aten::fill_", "aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::native_dropout"}


def op_kind(op: OpRecord) -> str:
    """"view", "pointwise", "reduction", "matmul" or "other"."""
    if op.name in VIEW_OPS:
        return "view"
    if op.name in MATMUL_OPS:
        return "matmul"
    if op.name in REDUCTION_OPS:
        return "reduction"
    if op.name in POINTWISE_EXTRA or _tagged_pointwise(op.name, op.overload):
        return "pointwise"
    return "other"


def _tagged_pointwise(name: str, overload: str) -> bool:
    import torch

    namespace, short = name.split("::", 1)
    try:
        packet = getattr(getattr(torch.ops, namespace), short)
        return torch.Tag.pointwise in getattr(packet, overload).tags
    except (AttributeError, RuntimeError):
        return False


@dataclass
class Escape:
    vid: int
    by: str  # "saved for backward" | "used by aten::mm (layers.0.mlp)" | "returned by the model"
    shape: str = ""  # dtype and shape as a call that reads it recorded them, else its bytes


@dataclass
class Chain:
    ops: list[OpRecord]  # the chain's calls (views of chain data included), in order
    holder: str  # innermost module path holding every call
    inputs: list[int] = field(default_factory=list)  # values read from outside, in first-use order
    outputs: list[int] = field(default_factory=list)  # the result, then escaping intermediates
    escapes: list[Escape] = field(default_factory=list)
    unfused_bytes: int = 0
    fused_bytes: int = 0
    ms: float = 0.0
    repeats: int = 1  # equal chains (same calls, shapes and literals) in the step
    similar: list["Chain"] = field(default_factory=list)
    compiled: str = ""  # what torch.compile does with it
    role: str = ""  # "head+loss": the last linear layer and its cross-entropy (kernelpilot.profiling.head_loss)
    where: str = "forward"  # "script": the chain ends in the script, after the model's forward returned

    def compute_ops(self) -> list[OpRecord]:
        return [o for o in self.ops if op_kind(o) != "view"]

    def made(self) -> set[int]:
        """The values the chain's calls make."""
        return {v for o in self.ops for v in o.outputs if v is not None}

    def key(self) -> str:
        parts = []
        for op in self.ops:
            args = [_shape_key(a) for a in op.args] + [f"{k}={_shape_key(v)}" for k, v in op.kwargs.items()]
            parts.append(f"{op.name}.{op.overload}({','.join(args)})")
        return ";".join(parts)

    def label(self) -> str:
        names = [o.name.removeprefix("aten::") for o in self.compute_ops()]
        return " -> ".join(names)

    def kind(self) -> str:
        if self.role:
            return self.role
        kinds = {op_kind(o) for o in self.compute_ops()}
        if "matmul" in kinds:
            return "matmul+epilogue"
        return "reduction" if "reduction" in kinds else "elementwise"


def _shape_key(v: Any) -> str:
    if isinstance(v, TensorRef):
        return v.spec.key()
    if isinstance(v, list):
        return "[" + ",".join(_shape_key(x) for x in v) + "]"
    return repr(v)


MAX_STEP_OVER = 3  # independent calls a chain may step over (e.g. the up projection between SiLU and *)


def find_chains(trace: Trace, step: int) -> list[Chain]:
    """The chains of ``step``'s forward, heaviest first (equal chains merged, ``repeats``): elementwise
    and reduction chains, and each matmul with its pointwise epilogue."""
    ops = [o for o in trace.ops if o.step == step and o.phase == "forward"]
    consumers = trace.consumers()
    found: list[list[OpRecord]] = []
    taken: set[int] = set()
    for i, op in enumerate(ops):
        kind = op_kind(op)
        if kind == "matmul":
            members = _grow(ops, i, ("pointwise",))
            if len(members) >= 2:
                found.append(members)
        elif kind in ("pointwise", "reduction") and op.index not in taken:
            members = _grow(ops, i, ("pointwise", "reduction"))
            if len([m for m in members if op_kind(m) != "view"]) >= 2:
                found.append(members)
                taken.update(m.index for m in members)
    return _merge([measure(trace, members, consumers) for members in found])


def _grow(ops: list[OpRecord], start: int, joins: tuple[str, ...]) -> list[OpRecord]:
    """The chain starting at ``ops[start]``: later calls of a kind in ``joins`` (or views) reading a
    value the chain made join; a call of another kind reading one ends it; up to MAX_STEP_OVER calls
    reading none are stepped over. Trailing views are dropped."""
    members = [ops[start]]
    made = {v for v in ops[start].outputs if v is not None}
    stepped = 0
    for op in ops[start + 1:]:
        reads = any(r.vid in made for r in op.tensor_inputs())
        kind = op_kind(op)
        if reads and (kind in joins or kind == "view"):
            members.append(op)
            made.update(v for v in op.outputs if v is not None)
            stepped = 0
        elif reads:
            break
        elif kind != "view":
            stepped += 1
            if stepped > MAX_STEP_OVER:
                break
    while members and op_kind(members[-1]) == "view":
        members.pop()
    return members


def measure(trace: Trace, ops: list[OpRecord], consumers: dict[int, list[int]]) -> Chain:
    """The chain of ``ops``: its holder, inputs, outputs, escaping intermediates and bytes."""
    indexes = {o.index for o in ops}
    produced: dict[int, OpRecord] = {}
    for o in ops:
        for v in o.outputs:
            if v is not None:
                produced.setdefault(v, o)
    chain = Chain(ops, _holder(ops))
    for o in ops:
        for r in o.tensor_inputs():
            if r.vid not in produced and r.vid not in chain.inputs:
                chain.inputs.append(r.vid)
    sizes: dict[int, int] = {}
    for o in ops:
        if op_kind(o) == "view":
            continue
        chain.unfused_bytes += sum({r.vid: r.nbytes for r in o.tensor_inputs()}.values()) + o.out_bytes
        chain.ms += o.ms
        for r in o.tensor_inputs():
            sizes.setdefault(r.vid, r.nbytes)
    last = [v for v in ops[-1].outputs if v is not None]
    chain.outputs = list(last)
    for vid, op in produced.items():
        if vid in last:
            continue
        outside = [i for i in consumers.get(vid, []) if i not in indexes and i > op.index]
        forward_users = [i for i in outside if trace.ops[i].phase == "forward"]
        if forward_users:
            user = trace.ops[forward_users[0]]
            by = f"used by {user.name}" + (f" ({user.stack[-1]})" if user.stack and user.stack[-1] else "")
        elif vid in trace.saved:
            by = "saved for backward"
        elif vid in trace.root_outputs:
            by = "returned by the model"
        else:
            continue
        # its dtype and shape as a call that reads it recorded them; read by nothing recorded (autograd keeps
        # it): its producer's bytes
        shape = _seen_shape(vid, [*ops, *(trace.ops[i] for i in outside)]) or (
            f"{_output_bytes(op):,} bytes" if op.out_bytes else "its shape was not recorded")
        chain.escapes.append(Escape(vid, by, shape))
        chain.outputs.append(vid)
    out_bytes = {v: 0 for v in chain.outputs}
    for o in ops:
        for v in o.outputs:
            if v in out_bytes:
                out_bytes[v] = _output_bytes(o)
    input_bytes = {}
    for o in ops:
        for r in o.tensor_inputs():
            if r.vid in chain.inputs:
                input_bytes.setdefault(r.vid, r.nbytes)
    chain.fused_bytes = sum(input_bytes.values()) + sum(out_bytes.values())
    return chain


def _holder(ops: list[OpRecord]) -> str:
    stacks = [o.stack for o in ops]
    common: list[str] = []
    for level in zip(*stacks):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return common[-1] if common else ""


def _merge(chains: list[Chain]) -> list[Chain]:
    merged: dict[str, Chain] = {}
    for c in chains:
        key = c.key()
        if key in merged:
            first = merged[key]
            first.repeats += 1
            first.ms += c.ms
            first.similar.append(c)
        else:
            merged[key] = c
    return sorted(merged.values(), key=lambda c: c.ms, reverse=True)


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def fusion_table(chains: list[Chain], *, step_ms: float, clock: str, top: int = 15) -> str:
    lines = [f"{'#':>3}  {'ms':>8}  {'% step':>6}  {'n':>4}  {'unfused':>9}  {'fused':>9}  kind / compiled / module: "
             f"chain   ({clock}; one step; step {step_ms:.3f} ms uninstrumented)"]
    for i, c in enumerate(chains[:top], 1):
        share = 100 * c.ms / step_ms if step_ms > 0 else 0.0
        count = f"x{c.repeats}" if c.repeats > 1 else ""
        holder = "model" + (f".{c.holder}" if c.holder else "") + (" and the script" if c.where == "script" else "")
        lines.append(f"{i:>3}  {c.ms:8.3f}  {share:6.1f}  {count:>4}  {_fmt_bytes(c.unfused_bytes):>9}  "
                     f"{_fmt_bytes(c.fused_bytes):>9}  {c.kind()} / {c.compiled or 'not checked'} / {holder}: "
                     f"{c.label()}")
        for e in c.escapes:
            lines.append(f"{'':>44}  ! an intermediate ({e.shape}) is {e.by}: a fused kernel must still write it")
    return "\n".join(lines)


def _seen_shape(vid: int, calls: Any) -> str:
    """The value's dtype and shape as the first of ``calls`` that reads it recorded it ("" if none does)."""
    for o in calls:
        for r in o.tensor_inputs():
            if r.vid == vid:
                return r.spec.key()
    return ""


def _output_bytes(op: OpRecord) -> int:
    """Bytes of each tensor of the call's result (its output bytes shared among them)."""
    return op.out_bytes // max(1, sum(1 for x in op.outputs if x is not None))
