"""The recorded forward of a chain's holder, with its child modules called rather than inlined.

A chain swapped into the module holding it replaces that module's forward by its recorded ATen calls
(``holder.py``). Inlining every call of the holder's children (a decoder layer's attention, its MLP, its
norms) would run their recorded calls instead of the children themselves, so another kernel swapped into
one of those children (an approved RMSNorm) would never run beside the chain. Here each direct child whose
calls hold none of the chain's, whose arguments the replay can name and which takes no object argument is
called as a module, with its recorded arguments: ``_tensors(P.m_mlp(v12))``. The others are inlined and
listed, so `kernelpilot apply` knows which modules the chain's swap takes out of the run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.profiling.program import Program
from kernelpilot.profiling.records import ModuleCall, vids_in
from kernelpilot.profiling.trace import Trace

TENSORS_HELPER = '''

def _tensors(value):
    """The tensors of a module's result, in the order the trace recorded them, each once."""
    out = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            if not any(v is o for o in out):
                out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)

    walk(value)
    return tuple(out)
'''


class Unnamed(Exception):
    """A child's argument the replay has no name for: the child is inlined instead."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


@dataclass
class Plan:
    skip: set[int] = field(default_factory=set)  # op indexes the calls stand for
    replace: dict[int, tuple[list[int], Any]] = field(default_factory=dict)  # first op -> (outputs, call)
    modules: dict[str, str] = field(default_factory=dict)  # attribute on P -> child path relative to the holder
    inlined: list[str] = field(default_factory=list)  # relative paths of the children whose calls are replayed


def direct_children(trace: Trace, call: ModuleCall) -> list[ModuleCall]:
    """The outermost module calls inside ``call`` (in order), each with at least one recorded call."""
    inside = [c for c in trace.calls if c is not call and c.step == call.step and call.first_op <= c.first_op
              and c.last_op <= call.last_op and c.last_op > c.first_op]
    out: list[ModuleCall] = []
    for c in sorted(inside, key=lambda c: (c.first_op, -c.last_op)):  # stable: an outer call of equal range first
        if out and c.first_op < out[-1].last_op:
            continue
        out.append(c)
    return out


def plan(trace: Trace, call: ModuleCall, members: set[int], forced: set[str]) -> Plan:
    """Which children of ``call`` the replay calls (``forced``: paths to inline whatever)."""
    result = Plan()
    prefix = call.path + "." if call.path else ""
    for child in direct_children(trace, call):
        rel = child.path[len(prefix):] if child.path.startswith(prefix) and child.path != call.path else ""
        ops = [i for i in range(child.first_op, child.last_op) if trace.ops[i].phase == "forward"]
        if (not rel or child.path in forced or child.objects or not ops or any(i in members for i in ops)):
            result.inlined.append(rel or child.path)
            continue
        attr = "m_" + re.sub(r"\W", "_", rel)
        result.modules[attr] = rel
        outs = list(dict.fromkeys(vids_in(child.output)))
        result.replace[ops[0]] = (outs,
                                  lambda prog, me, c=child, a=attr: f"_tensors({me}.{a}({arguments(prog, me, c)}))")
        result.skip.update(ops[1:])
    return result


def arguments(prog: Program, me: str, child: ModuleCall) -> str:
    """The child's recorded arguments as Python: positional, then keywords; nested keys (``x.0``) as the
    tuple or dict they came in."""
    tree: dict[str, Any] = {}
    for key, ref in child.inputs:
        _put(tree, key.split("."), ("tensor", ref.vid))
    for key, value in child.literals.items():
        _put(tree, key.split("."), ("literal", value))
    positional = sorted((k for k in tree if k.isdigit()), key=int)
    if positional != [str(i) for i in range(len(positional))]:
        raise Unnamed(child.path)  # an argument left out in the middle: not written back faithfully
    parts = [_render(prog, me, child, tree[k]) for k in positional]
    parts += [f"{k}={_render(prog, me, child, v)}" for k, v in tree.items() if not k.isdigit()]
    return ", ".join(parts)


def _put(tree: dict[str, Any], keys: list[str], leaf: tuple[str, Any]) -> None:
    for k in keys[:-1]:
        tree = tree.setdefault(k, {})
    tree[keys[-1]] = leaf


def _render(prog: Program, me: str, child: ModuleCall, node: Any) -> str:
    if isinstance(node, dict):
        if all(k.isdigit() for k in node) and sorted(node, key=int) == [str(i) for i in range(len(node))]:
            items = [_render(prog, me, child, node[str(i)]) for i in range(len(node))]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "{" + ", ".join(f"{k!r}: {_render(prog, me, child, v)}" for k, v in node.items()) + "}"
    kind, value = node
    if kind == "tensor":
        try:
            return prog.names.get(value) or prog.value(value, me)
        except KeyError:
            raise Unnamed(child.path) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise Unnamed(child.path)
    return repr(value)  # an object argument never gets here: plan() inlines a child called with one
