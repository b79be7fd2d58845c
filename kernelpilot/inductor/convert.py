"""Turn torch.compile's output code (Inductor's generated module) into a self-contained Triton candidate.

The candidate keeps Inductor's ``@triton.jit`` kernels verbatim (and the ``@triton.jit`` helpers
Inductor defines beside them) and a ``ModelNew`` whose forward is Inductor's ``call``, unwrapped
(body.py): launches with the grid Inductor's launcher computes (kernels.py), plain torch buffers, and
Inductor's library calls and ATen fallbacks kept as torch calls, declared in ``KERNELPILOT_LIBRARIES``
(the engine allows those for this candidate only and lists them in the verdict). Nothing of Inductor's
runtime is left: no async_compile, no torch._inductor import, no ``call(args)``; the ``triton_helpers``
functions the kernels call are copied, from the torch that generated the code, into
``triton_helpers.py`` beside it (helpers.py).

``convert`` handles one graph that is the whole forward; ``convert_traced`` handles whatever else
dynamo made of it (several graphs, eager code between or after them, attribute stores), from the
steps trace.py learned (render.py writes both shapes).

Launch configs: the ones the recording run chose (``configs``, from generate.py on the GPU); without
them, Inductor's own candidate configs for the kernel become a ``@triton.autotune`` list, and the
choice is made at the worker's warm-up, as Inductor makes it at its first call.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.inductor import libraries, render
from kernelpilot.inductor.body import Body
from kernelpilot.inductor.facts import Source, state_expr
from kernelpilot.inductor.helpers import ConversionError, helper_module
from kernelpilot.inductor.kernels import Kernel, parse_kernels, shared_helpers

__all__ = ["Conversion", "Graph", "Source", "convert", "convert_traced", "graph_inputs", "parse_graph", "parse_kernels"]
Spec = tuple[str, tuple[int, ...], str]


@dataclass
class Conversion:
    files: dict[str, str]  # file name -> text (model_new.py, and triton_helpers.py when the kernels use it)
    kernels: list[str]
    libraries: list[str]  # e.g. ["cublas", "aten.avg_pool3d"]: library calls kept as torch calls, declared
    configs: str  # "recorded" (the recording run's choice) or "autotuned" (Inductor's candidates, at warm-up)
    shape: str = "graph"  # "graph" (one graph, the whole forward), "traced" (graphs + eager code), "eager"
    notes: list[str] = field(default_factory=list)


@dataclass
class Graph:
    """One Inductor graph: its kernels and its call() rewritten."""

    kernels: dict[str, Kernel]
    body: Body


def _call_function(code: str) -> ast.FunctionDef:
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
    raise ConversionError("the output code has no call() function: is this torch.compile's Inductor output?")


def graph_inputs(code: str) -> list[str]:
    """The names call() unpacks its arguments into (``arg0_1``, ...), in order."""
    for stmt in ast.walk(_call_function(code)):
        if (isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args"
                and isinstance(stmt.targets[0], ast.Tuple)):
            return [e.id for e in stmt.targets[0].elts if isinstance(e, ast.Name)]
    return []


def parse_graph(code: str, configs: dict[str, Any] | None) -> Graph:
    kernels = parse_kernels(code)
    body = Body(code, kernels, configs)
    call = _call_function(code)
    body.statements(call.body, call.lineno)
    return Graph(kernels, body)


def _helper_files(kernels: dict[str, Kernel], helper_texts: list[str], helpers_source: str | None,
                  torch_version: str) -> dict[str, str]:
    texts = [k.text for k in kernels.values()] + helper_texts
    used = sorted({h for t in texts for h in re.findall(r"triton_helpers\.(\w+)", t)})
    if not used:
        return {}
    counts: dict[str, int] = {}
    for text in texts:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    ast.unparse(node.func.value) == "triton_helpers":
                counts[node.func.attr] = len(node.args) + len(node.keywords)
    return {"triton_helpers.py": helper_module(set(used), counts, helpers_source, torch_version)}


def _fix_source(expr: str, buffers: list[Spec]) -> str:
    """A recording's ``self.get_parameter('bn.0.running_mean')`` for a buffer is ``get_buffer``."""
    match = re.fullmatch(r"self\.get_parameter\('([^']+)'\)", expr)
    if match and match.group(1) in {b[0] for b in buffers}:
        return state_expr(match.group(1), "buffer")
    return expr


def convert(code: str, sources: dict[str, Source] | None, *, params: list[Spec], buffers: list[Spec],
            inputs: list[Source], problem_name: str, configs: dict[str, Any] | None = None, torch_version: str = "",
            helpers_source: str | None = None) -> Conversion:
    """The candidate's files for Inductor output ``code`` that is the whole forward.

    ``sources`` maps each graph input (``arg0_1``, ...) to where ModelNew finds it; without it they are
    matched by shape and stride to ``inputs`` (forward arguments) and ``params``/``buffers`` (the
    problem Model's state, ``(name, shape, dtype)``), in that order. ``helpers_source``: the
    triton_helpers.py of the torch (``torch_version``) that generated the code.
    """
    graph = parse_graph(code, configs)
    body = graph.body
    if sources is None:
        sources = _match_sources(body.args, body.asserts, inputs, params, buffers)
    missing = [a for a in body.args if a not in sources]
    if missing:
        raise ConversionError(f"cannot tell which parameter or input {', '.join(missing)} is; record the "
                              "conversion on the GPU (kernelpilot init --from-inductor), which observes it.")
    helpers = shared_helpers(graph.kernels)
    files = _helper_files(graph.kernels, list(helpers.values()), helpers_source, torch_version)
    output = body.returns[0] if len(body.returns) == 1 else f"({', '.join(body.returns)})"
    names = [s.expr for s in inputs]
    exprs = [_fix_source(sources[a].expr, buffers) for a in body.args]
    cls = ["class ModelNew(nn.Module):"] + render.shell_init(params, buffers) + \
        render.inline_forward(names, body.args, exprs, body.out, output, [])
    text = _module(problem_name, graph.kernels, body.autotuned, helpers, body.libraries, bool(files), [],
                   "\n".join(cls))
    files = {"model_new.py": text, **files}
    used = [k.name for v, k in graph.kernels.items() if v in "\n".join(body.out)]
    return Conversion(files, used, body.libraries, "autotuned" if body.autotuned else "recorded")


def convert_traced(graphs: list[tuple[str, dict[str, Any] | None]], trace: Any, *, params: list[Spec],
                   buffers: list[Spec], arg_names: list[str], problem_name: str, torch_version: str = "",
                   helpers_source: str | None = None, init: str | None = None,
                   notes: list[str] | None = None) -> Conversion:
    """The candidate's files for the graphs ``graphs`` (code, configs) run as ``trace`` (trace.Trace) says.

    ``init``: the class source to use instead of a parameter-registering __init__ (problem_source.py),
    with ``{methods}`` where the forward and graph methods go."""
    parsed = [parse_graph(code, configs) for code, configs in graphs]
    kernels: dict[str, Kernel] = {}
    autotuned: dict[str, list[dict[str, Any]]] = {}
    declared: list[str] = []
    for index, graph in enumerate(parsed):
        _rename_clashes(index, graph, kernels)
        kernels.update(graph.kernels)
        autotuned.update(graph.body.autotuned)
        libraries.add(declared, graph.body.libraries)
    libraries.add(declared, trace.libraries)
    for step in trace.steps:
        if not isinstance(step, str) and len(step.args) != len(parsed[step.graph].body.args):
            raise ConversionError(f"dynamo here gives graph {step.graph} {len(step.args)} inputs, the recording "
                                  f"{len(parsed[step.graph].body.args)}: this torch traces the problem differently "
                                  "from the one that recorded it; record and convert with the same torch.")
    helpers = shared_helpers(kernels)
    files = _helper_files(kernels, list(helpers.values()), helpers_source, torch_version)
    graph_steps = [s for s in trace.steps if not isinstance(s, str)]
    if len(graph_steps) == 1 and trace.eager_calls == 0:  # one graph with stores or a chosen output: inline
        body = parsed[graph_steps[0].graph].body
        rename = {f"{graph_steps[0].var}[{i}]": r for i, r in enumerate(body.returns)}

        def swap(s: str) -> str:
            return re.sub(r"\bg0\[(\d+)\]", lambda m: rename[m.group(0)], s)

        methods = render.inline_forward(arg_names, body.args, [_fix_source(a, buffers) for a in graph_steps[0].args],
                                        body.out, swap(trace.output), [swap(s) for s in trace.stores])
    else:
        methods = render.traced_forward(arg_names, trace.steps, trace.output, trace.stores)
        for index, graph in enumerate(parsed):
            methods += render.graph_method(index, graph.body.args, graph.body.out, graph.body.returns)
    if init is None:
        cls = "\n".join(["class ModelNew(nn.Module):"] + render.shell_init(params, buffers) + methods)
    else:
        cls = init.replace("{methods}", "\n".join(methods[1:]))
    text = _module(problem_name, kernels, autotuned, helpers, declared, bool(files), notes or [], cls)
    used = [k.name for v, k in kernels.items()]
    return Conversion({"model_new.py": text, **files}, used, declared, "autotuned" if autotuned else "recorded",
                      "traced", list(notes or []))


def _rename_clashes(index: int, graph: Graph, seen: dict[str, Kernel]) -> None:
    """Two graphs may name different kernels alike (``triton_poi_fused_0``): the later one gets a suffix."""
    for var in [v for v in graph.kernels if v in seen and seen[v].text != graph.kernels[v].text]:
        new = f"{var}_g{index}"
        k = graph.kernels.pop(var)
        k.text = re.sub(rf"\b{re.escape(var)}\b", new, k.text)
        k.name = new
        graph.kernels[new] = k
        graph.body.out = [re.sub(rf"\b{re.escape(var)}\b", new, line) for line in graph.body.out]
        if var in graph.body.autotuned:
            graph.body.autotuned[new] = graph.body.autotuned.pop(var)


def _module(problem_name: str, kernels: dict[str, Kernel], autotuned: dict[str, Any], helpers: dict[str, str],
            declared: list[str], has_helpers: bool, notes: list[str], cls: str) -> str:
    text = "\n".join([k.text for k in kernels.values()] + list(helpers.values()))
    parts = [render.header(problem_name, text, declared, has_helpers, notes)]
    parts += render.kernel_blocks(kernels, autotuned, helpers)
    parts.append(cls)
    return "\n\n\n".join(parts) + "\n"


def _match_sources(args: list[str], asserts: dict[str, Any], inputs: list[Source], params: list[Spec],
                   buffers: list[Spec]) -> dict[str, Source]:
    pool = list(inputs) + [Source(state_expr(n, "parameter"), tuple(s), _contiguous(s)) for n, s, _ in params]
    pool += [Source(state_expr(n, "buffer"), tuple(s), _contiguous(s)) for n, s, _ in buffers]
    out: dict[str, Source] = {}
    for arg in args:
        shape, stride = asserts.get(arg, (None, None))
        hit = next((s for s in pool if s.shape == shape and (s.stride == stride or not s.stride)), None)
        if hit is not None:
            out[arg] = hit
            pool.remove(hit)
    return out


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.insert(0, acc)
        acc *= max(size, 1)
    return tuple(strides)
