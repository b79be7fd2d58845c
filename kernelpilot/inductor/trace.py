"""What torch.compile runs for a problem, graph by graph and call by call, learned on the meta device.

A recording holds Inductor's code for each graph dynamo compiled, but not what runs around those
graphs: the code after a graph break, a module dynamo leaves to eager (``nn.LSTM``: "step
unsupported", the rest of the frame runs eagerly), the values a graph returns for dynamo to store into
module attributes. ``trace_forward`` finds out by running dynamo itself, here, on the problem's meta
model, with a backend that runs each FX graph as it is (no Inductor, no GPU):

1. a first call compiles every frame, as torch.compile's first call on the GPU did; the order the graphs
   run in is the recording's graph order;
2. a second call records. Each graph's wrapper notes the objects it got and returned, and after it a
   ``TorchFunctionMode`` records every top-level torch call until the next graph (or forward's return):
   the eager code between graphs. Entering the next compiled frame with that mode on fails dynamo's
   guard on the mode stack; the guard-failure hook takes the mode off first, so the frame is traced again
   exactly as before and its graph runs (the wrapper of the retrace stands for the same graph).

The result (``Trace``) is ModelNew's forward as steps: ``g0 = self._graph0(device, <args>)`` for each
graph with every argument named (forward argument, ``self.<param>``, a plain attribute, an earlier
graph's output, an eager result), the eager calls as source (glue.py), only those whose results are
used or that write in place, the return expression and the attribute stores dynamo makes with graph
outputs (``self.hidden = g0[1]``).

Dynamo here is this process's torch; the recording's may be another version. The caller checks that
both agree on the number of graphs and of each graph's inputs, and refuses the conversion otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.inductor import libraries
from kernelpilot.inductor.facts import ModelFacts, plain_tensors, state_expr
from kernelpilot.inductor.glue import Call, Names, render_call
from kernelpilot.inductor.helpers import ConversionError


@dataclass
class GraphStep:
    graph: int  # the recording's graph index
    args: list[str]  # one expression per graph input
    var: str  # g<j>: the tuple of its outputs


@dataclass
class Trace:
    steps: list[GraphStep | str] = field(default_factory=list)  # graph calls and eager statements, in order
    output: str = "None"
    stores: list[str] = field(default_factory=list)  # attribute stores after the last step
    libraries: list[str] = field(default_factory=list)  # what the eager statements need declared
    graph_inputs: list[int] = field(default_factory=list)  # per graph (recording order): its input count
    eager_calls: int = 0

    @property
    def graphs(self) -> int:
        return len(self.graph_inputs)


class _Recorder:
    """The events of one recorded call: ("graph", j, inputs, outputs) and ("call", Call)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.mode: Any = None
        self.on = False

    def push(self) -> None:
        if self.on and self.mode is None:
            self.mode = _mode_class()(self)
            self.mode.__enter__()

    def pop(self, *_: Any) -> None:
        if self.mode is not None:
            mode, self.mode = self.mode, None
            mode.__exit__(None, None, None)


def _mode_class() -> Any:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernelpilot.evaluation.audit.runtime import MEMORY_OPS

    class AtenOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            name = getattr(getattr(func, "_overloadpacket", func), "__name__", str(func)).split(".")[-1]
            if getattr(func, "namespace", "aten") == "aten" and name not in MEMORY_OPS \
                    and name.rstrip("_") not in MEMORY_OPS and name not in self.ops:
                self.ops.append(name)
            return func(*args, **(kwargs or {}))

    class Record(TorchFunctionMode):
        def __init__(self, recorder: _Recorder) -> None:
            super().__init__()
            self.recorder = recorder

        @torch.compiler.disable
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") in libraries.TORCH_FUNCTION_LIBRARIES:  # its library is known
                result, ops = func(*args, **kwargs), []
            else:  # which compute operators it runs: what the candidate declares for it
                with AtenOps() as aten:
                    result = func(*args, **kwargs)
                ops = aten.ops
            self.recorder.events.append(("call", Call(func, tuple(args), dict(kwargs), result, ops)))
            return result

    return Record


def trace_forward(facts: ModelFacts) -> Trace:
    """ModelNew's forward as torch.compile runs it (see the module docstring)."""
    import torch

    model, inputs = facts.model, facts.inputs
    recorder = _Recorder()
    order: list[int] = []  # compile index of each graph run by the first call
    compiled: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        index = len(compiled)
        compiled.append(gm)

        def run(*args: Any) -> Any:
            recorder.pop()
            if not recorder.on:
                order.append(index)
            out = gm.forward(*args)
            if recorder.on:
                recorder.events.append(("graph", index, list(args), out))
            recorder.push()
            return out

        return run

    torch._dynamo.reset()
    try:
        fn = torch._dynamo.optimize(backend, guard_fail_fn=recorder.pop)(model)
        with torch.no_grad():
            fn(*inputs)
            names = _initial_names(facts)
            recorder.on = True  # from the first graph on: eager code before it is not seen (see below)
            out = fn(*inputs)
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(f"dynamo could not trace the problem on the meta device ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200] if str(exc) else ''}), so the code between "
                              "torch.compile's graphs is unknown.") from exc
    finally:
        recorder.pop()
        recorder.on = False
        torch._dynamo.reset()
    runs = [e for e in recorder.events if e[0] == "graph"]
    if len(runs) != len(order):
        raise ConversionError(f"dynamo ran {len(order)} graphs on the first call and {len(runs)} on the second; "
                              "the problem's forward is not the same from call to call.")
    trace = Trace(graph_inputs=[len([n for n in compiled[i].graph.nodes if n.op == "placeholder"]) for i in order])
    rendered = _render(recorder.events, order, names)
    trace.output = names.expr(out) if out is not None else "None"
    trace.stores = _stores(facts, names)
    _keep(trace, rendered, _roots(trace.output) | {r for s in trace.stores for r in _roots(s)})
    return trace


def _initial_names(facts: ModelFacts) -> Names:
    names = Names()
    for name, value in zip(facts.arg_names, facts.inputs):
        names.bind(value, name)
    for name, param in facts.model.named_parameters(remove_duplicate=False):
        names.bind(param, state_expr(name, "parameter"))
    for name, buffer in facts.model.named_buffers(remove_duplicate=False):
        names.bind(buffer, state_expr(name, "buffer"))
    for expr, (_, _, value) in plain_tensors(facts.model).items():
        names.bind(value, expr)
    return names


_Rendered = tuple[GraphStep | str, set[str], str, Call | None]  # step, names it reads, name it defines, call


def _render(events: list[tuple[Any, ...]], order: list[int], names: Names) -> list[_Rendered]:
    """Graph calls and the eager calls between them, in order, each with its arguments named."""
    rendered: list[_Rendered] = []
    runs = eager = 0
    for event in events:
        if event[0] == "graph":
            _, _, args, out = event
            step = GraphStep(order[runs], [names.expr(a) for a in args], f"g{runs}")
            names.bind(tuple(out) if isinstance(out, (tuple, list)) else (out,), step.var)
            rendered.append((step, {r for a in step.args for r in _roots(a)}, step.var, None))
            runs += 1
            continue
        call: Call = event[1]
        if not _makes_tensors(call):
            continue  # metadata (x.dim(), x.size(0)): folded into the literals of the calls that use it
        var = f"v{eager}"
        eager += 1
        source = render_call(call, names)
        reads = _roots(source)
        names.bind(call.result, var)
        rendered.append((source if call.name == "__setitem__" else f"{var} = {source}", reads, var, call))
    return rendered


def _keep(trace: Trace, rendered: list[_Rendered], roots: set[str]) -> None:
    """The steps forward needs: every graph call, every in-place eager call, and the eager calls whose
    results a kept step, the output or a store reads; with what their libraries are."""
    needed = set(roots)
    kept: list[tuple[GraphStep | str, Call | None]] = []
    for step, reads, defines, call in reversed(rendered):
        if isinstance(step, GraphStep) or (call is not None and call.mutates) or defines in needed:
            needed |= reads
            kept.insert(0, (step, call))
    for step, call in kept:
        trace.steps.append(step)
        if call is None:
            continue
        trace.eager_calls += 1
        libraries.add(trace.libraries, _declaration(call))


def _roots(source: str) -> set[str]:
    """The graph results (``g0``) and eager results (``v3``) a piece of source reads."""
    return set(re.findall(r"\b([gv]\d+)\b", source))


def _makes_tensors(call: Call) -> bool:
    import torch
    from torch.utils._pytree import tree_flatten

    results = [x for x in tree_flatten(call.result)[0] if isinstance(x, torch.Tensor)]
    return bool(results) or call.mutates


def _stores(facts: ModelFacts, names: Names) -> list[str]:
    """``self.<attr> = <value>`` for each plain attribute forward rebound to a value it computed."""
    stores = []
    for expr, (_, _, value) in plain_tensors(facts.model).items():
        current = names.exprs.get(id(value))
        if current is not None and current != expr and not current.startswith("self"):
            stores.append(f"{expr} = {current}")
    return stores


def eager_libraries(facts: ModelFacts) -> list[str]:
    """What the problem's forward, run eagerly, must declare: its top-level torch calls' libraries."""
    import torch

    recorder = _Recorder()
    recorder.on = True
    try:
        with torch.no_grad():
            recorder.push()
            facts.model(*facts.inputs)
    except Exception as exc:
        raise ConversionError(f"the problem's forward does not run on the {facts.built_on} device "
                              f"({type(exc).__name__}: {str(exc)[:200]}), so its library calls are unknown.") from exc
    finally:
        recorder.pop()
    declared: list[str] = []
    for event in recorder.events:
        call = event[1]
        if not _makes_tensors(call):
            continue
        libraries.add(declared, _declaration(call))
    return declared


def _declaration(call: Call) -> list[str]:
    """The declarations one eager call needs: its library when known, else the ATen operators it ran."""
    entries = libraries.TORCH_FUNCTION_LIBRARIES.get(call.name)
    if entries:
        return list(entries)
    out: list[str] = []
    for op in call.aten:
        libraries.add(out, libraries.aten_declaration(op))
    return out
