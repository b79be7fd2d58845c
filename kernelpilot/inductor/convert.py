"""Turn torch.compile's output code (Inductor's generated module) into a self-contained Triton candidate.

The candidate keeps Inductor's ``@triton.jit`` kernels verbatim and a ``ModelNew`` whose forward is
Inductor's ``call``, unwrapped: every ``kernel.run(args, stream=...)`` becomes ``kernel[grid](args,
BLOCKs, num_warps=, num_stages=)`` with the grid Inductor's launcher computes (Grid1D/2D/3D from the
numel arguments and the block sizes), ``empty_strided_cuda`` becomes ``torch.empty_strided``,
``reinterpret_tensor`` becomes ``torch.as_strided``, and an ``extern_kernels`` call (mm, addmm, bmm,
convolution) becomes the equivalent torch call, declared in ``KERNELPILOT_LIBRARIES`` (the engine
allows those libraries for this candidate only and lists them in the verdict). Nothing of Inductor's
runtime is left: no async_compile, no torch._inductor import, no ``call(args)``.

Launch configs: the ones the recording run chose (``configs``, from generate.py on the GPU); without
them, Inductor's own candidate configs for the kernel become a ``@triton.autotune`` list, and the
choice is made at the worker's warm-up, as Inductor makes it at its first call.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.inductor.helpers import ConversionError, helper_module, inductor_configs

_KERNEL = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)', '''\n(.*?)''', device_str='cuda'\)", re.S | re.M)
_LIBRARY_CALLS = {"mm": ("torch.mm", "cublas"), "addmm": ("torch.addmm", "cublas"), "bmm": ("torch.bmm", "cublas"),
                  "baddbmm": ("torch.baddbmm", "cublas"), "convolution": ("torch.convolution", "cudnn")}
_DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "get_raw_stream"}
_GRID_NUMELS = {"Grid1D": ("x",), "Grid2D": ("x", "y"), "Grid3D": ("x", "y", "z")}


@dataclass
class Kernel:
    name: str
    source: str  # the kernel module Inductor compiles (heuristics decorator included)
    text: str  # from @triton.jit to the end of the function, verbatim
    params: list[str]
    grid_type: str
    comments: list[str] = field(default_factory=list)


@dataclass
class Source:
    """Where ModelNew finds one graph input: ``self.linear.weight`` or the forward argument ``x``."""

    expr: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]


@dataclass
class Conversion:
    files: dict[str, str]  # file name -> text (model_new.py, and triton_helpers.py when the kernels use it)
    kernels: list[str]
    libraries: list[str]  # e.g. ["cublas"]: Inductor's extern calls kept as torch calls
    configs: str  # "recorded" (the recording run's choice) or "autotuned" (Inductor's candidates, at warm-up)


def parse_kernels(code: str) -> dict[str, Kernel]:
    kernels: dict[str, Kernel] = {}
    for match in _KERNEL.finditer(code):
        var, name, source = match.groups()
        tree = ast.parse(source)
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
        jit = next((d for d in fn.decorator_list if ast.unparse(d) == "triton.jit"), None)
        if jit is None:
            raise ConversionError(f"kernel {name} has no @triton.jit function; only Triton kernels can be converted.")
        lines = source.splitlines()
        grid = re.search(r"'grid_type': '(\w+)'", source)
        grid_type = grid.group(1) if grid else "Grid1D"
        if grid_type not in _GRID_NUMELS:
            raise ConversionError(f"kernel {name} uses Inductor's {grid_type} launch grid; only Grid1D/2D/3D kernels "
                                  "(pointwise and reduction) can be converted.")
        before = code[:match.start()].splitlines()
        comments: list[str] = []
        for line in reversed(before):
            if not line.startswith("#"):
                break
            comments.insert(0, line)
        comments = [c for c in comments if c.startswith(("# Topologically", "# Source node", "#   ")) and
                    "Tensor \"" not in c and "PlaceHolder" not in c and "call_function" not in c]
        kernels[var] = Kernel(name, source, "\n".join(lines[jit.lineno - 1:fn.end_lineno]),
                              [a.arg for a in fn.args.args], grid_type, comments)
    return kernels


def _call_function(code: str) -> ast.FunctionDef:
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
    raise ConversionError("the output code has no call() function: is this torch.compile's Inductor output?")


def graph_inputs(code: str) -> list[str]:
    """The names call() unpacks its arguments into (``arg0_1``, ...), in order."""
    for stmt in ast.walk(_call_function(code)):
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args" and isinstance(stmt.targets[0], ast.Tuple):
            return [e.id for e in stmt.targets[0].elts if isinstance(e, ast.Name)]
    return []


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


class _Body:
    """Inductor's call() statements, rewritten one by one into ModelNew.forward's."""

    def __init__(self, code: str, kernels: dict[str, Kernel], configs: dict[str, Any] | None) -> None:
        self.lines = code.splitlines()
        self.kernels = kernels
        self.configs = configs
        self.args: list[str] = []
        self.asserts: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.libraries: list[str] = []
        self.autotuned: dict[str, list[dict[str, Any]]] = {}
        self.out: list[str] = []

    def statements(self, body: list[ast.stmt], prev_end: int) -> None:
        for stmt in body:
            for line in self.lines[prev_end:stmt.lineno - 1]:
                if line.strip().startswith("# Topologically"):
                    self.out.append(line.strip())
            prev_end = stmt.end_lineno or stmt.lineno
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args":
            self.args = [e.id for e in stmt.targets[0].elts] if isinstance(stmt.targets[0], ast.Tuple) else []
            return
        if isinstance(stmt, ast.With):
            self.statements(stmt.body, stmt.lineno)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = ast.unparse(stmt.value.func)
            if func == "args.clear" or func.endswith("set_device"):
                return
            if func == "assert_size_stride" and isinstance(stmt.value.args[0], ast.Name):
                self.asserts[stmt.value.args[0].id] = (tuple(_literal(stmt.value.args[1])),
                                                      tuple(_literal(stmt.value.args[2])))
                return
            if func in _DROPPED_CALLS:
                return
            if func.endswith(".run") and func[:-4] in self.kernels:
                self.out.append(self.launch(func[:-4], stmt.value))
                return
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
                ast.unparse(stmt.value.func) in _DROPPED_CALLS:
            return
        self.out.append(ast.unparse(self.rewrite(stmt)))

    def rewrite(self, stmt: ast.stmt) -> ast.stmt:
        body = self

        class Rewriter(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                func = ast.unparse(node.func)
                if func == "empty_strided_cuda":
                    size, stride, dtype = node.args
                    return ast.parse(f"torch.empty_strided({ast.unparse(size)}, {ast.unparse(stride)}, "
                                     f"dtype={ast.unparse(dtype)}, device=device)", mode="eval").body
                if func == "reinterpret_tensor":
                    node.func = ast.parse("torch.as_strided", mode="eval").body
                    return node
                if func.startswith("extern_kernels."):
                    op = func.split(".", 1)[1]
                    if op not in _LIBRARY_CALLS:
                        raise ConversionError(f"Inductor calls extern_kernels.{op}, which has no torch equivalent here.")
                    torch_call, library = _LIBRARY_CALLS[op]
                    if library not in body.libraries:
                        body.libraries.append(library)
                    node.func = ast.parse(torch_call, mode="eval").body
                    return node
                if isinstance(node.func, ast.Name) and node.func.id.startswith(("empty_strided", "alloc_from_pool")):
                    raise ConversionError(f"the output code calls {node.func.id}: only CUDA buffers can be converted.")
                if func.startswith(("aten.", "torch.ops.")):
                    raise ConversionError(f"Inductor fell back to {func}, a PyTorch operator: the candidate would "
                                          "run it in forward and be rejected; write that part as a kernel.")
                return node

        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) == 1:
            stmt = ast.Return(value=stmt.value.elts[0])
        return ast.fix_missing_locations(Rewriter().visit(stmt))

    def launch(self, var: str, call: ast.Call) -> str:
        k = self.kernels[var]
        args = [ast.unparse(a) for a in call.args]
        values = dict(zip(k.params, call.args))
        numels = {axis: ast.unparse(values[f"{axis}numel"]) for axis in _GRID_NUMELS[k.grid_type]
                  if f"{axis}numel" in values}
        chosen = (self.configs or {}).get(k.name)
        if chosen is None:
            options = inductor_configs(k.source)
            if len(options) == 1:
                chosen = options[0]
            else:
                self.autotuned[var] = options
        if chosen is not None:
            kw = chosen["kwargs"]
            grid = [f"triton.cdiv({numels[a]}, {kw.get(a.upper() + 'BLOCK', 1)})" for a in numels] or ["1"]
            extra = [f"{key}={value!r}" for key, value in kw.items() if key in k.params]
            extra += [f"num_warps={chosen['num_warps']}", f"num_stages={chosen['num_stages']}"]
            return f"{var}[({', '.join(grid)},)]({', '.join(args + extra)})"
        grid = [f"triton.cdiv({numels[a]}, meta[{a.upper() + 'BLOCK'!r}])" for a in numels] or ["1"]
        return f"{var}[lambda meta: ({', '.join(grid)},)]({', '.join(args)})"


def _autotune(options: list[dict[str, Any]]) -> str:
    configs = ",\n        ".join(f"triton.Config({o['kwargs']!r}, num_warps={o['num_warps']}, num_stages={o['num_stages']})"
                                 for o in options)
    return f"@triton.autotune(\n    configs=[\n        {configs},\n    ],\n    key=[],\n)"


def convert(code: str, sources: dict[str, Source] | None, *, params: list[tuple[str, tuple[int, ...], str]],
            buffers: list[tuple[str, tuple[int, ...], str]], inputs: list[Source], problem_name: str,
            configs: dict[str, Any] | None = None, torch_version: str = "") -> Conversion:
    """The candidate's files for Inductor output ``code``.

    ``sources`` maps each graph input (``arg0_1``, ...) to where ModelNew finds it; without it they are
    matched by shape and stride to ``inputs`` (forward arguments) and ``params``/``buffers`` (the
    problem Model's state, ``(name, shape, dtype)``), in that order.
    """
    kernels = parse_kernels(code)
    body = _Body(code, kernels, configs)
    call = _call_function(code)
    body.statements(call.body, call.lineno)
    if sources is None:
        sources = _match_sources(body.args, body.asserts, inputs, params, buffers)
    missing = [a for a in body.args if a not in sources]
    if missing:
        raise ConversionError(f"cannot tell which parameter or input {', '.join(missing)} is; record the "
                              "conversion on the GPU (kernelpilot init --from-inductor), which observes it.")
    helpers = sorted({h for k in kernels.values() for h in re.findall(r"triton_helpers\.(\w+)", k.text)})
    text = _model_file(kernels, body, sources, params, buffers, inputs, problem_name, bool(helpers))
    files = {"model_new.py": text}
    if helpers:
        files["triton_helpers.py"] = helper_module(set(helpers), _helper_calls(kernels))
    used = [v for v in kernels if v in "\n".join(body.out)]
    return Conversion(files, [kernels[v].name for v in used], body.libraries,
                      "autotuned" if body.autotuned else "recorded")


def _helper_calls(kernels: dict[str, Kernel]) -> dict[str, int]:
    """Positional argument counts of the kernels' triton_helpers calls."""
    counts: dict[str, int] = {}
    for k in kernels.values():
        for node in ast.walk(ast.parse(k.text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    ast.unparse(node.func.value) == "triton_helpers":
                counts[node.func.attr] = len(node.args) + len(node.keywords)
    return counts


def _match_sources(args: list[str], asserts: dict[str, Any], inputs: list[Source],
                   params: list[tuple[str, tuple[int, ...], str]],
                   buffers: list[tuple[str, tuple[int, ...], str]]) -> dict[str, Source]:
    pool = list(inputs) + [Source(_state_expr(n, "parameter"), tuple(s), _contiguous(s)) for n, s, _ in params]
    pool += [Source(_state_expr(n, "buffer"), tuple(s), _contiguous(s)) for n, s, _ in buffers]
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


def _state_expr(name: str, kind: str) -> str:
    if all(p.isidentifier() for p in name.split(".")):
        return f"self.{name}"
    return f"self.get_{kind}({name!r})"


def _model_file(kernels: dict[str, Kernel], body: _Body, sources: dict[str, Source],
                params: list[tuple[str, tuple[int, ...], str]], buffers: list[tuple[str, tuple[int, ...], str]],
                inputs: list[Source], problem_name: str, helpers: bool) -> str:
    text = "\n".join(k.text for k in kernels.values())
    head = [f'"""torch.compile\'s kernels for {problem_name}, as a Triton candidate (kernelpilot init --from-inductor).',
            "",
            "The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher",
            "did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.",
            '"""', "", "import torch", "import triton", "import triton.language as tl", "from torch import nn"]
    if "tl_math." in text:
        head.append("from triton.language import math as tl_math")
    if "libdevice." in text:
        head.append("from triton.language.extra import libdevice")
    if helpers:
        head += ["", "import triton_helpers"]
    head += ["", "", 'KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile\'s']
    if body.libraries:
        head.append(f"KERNELPILOT_LIBRARIES = {tuple(body.libraries)!r}  # Inductor's library calls, kept: allowed "
                    "for this candidate, listed in the verdict")
    parts = ["\n".join(head)]
    for var, k in kernels.items():
        block = "\n".join(k.comments)
        if var in body.autotuned:
            block += "\n" + _autotune(body.autotuned[var])
        parts.append((block + "\n" + k.text).strip("\n"))
    parts.append(_model_class(body, sources, params, buffers, inputs))
    return "\n\n\n".join(parts) + "\n"


def _model_class(body: _Body, sources: dict[str, Source], params: list[tuple[str, tuple[int, ...], str]],
                 buffers: list[tuple[str, tuple[int, ...], str]], inputs: list[Source]) -> str:
    lines = ["class ModelNew(nn.Module):", "    def __init__(self, *init_inputs) -> None:", "        super().__init__()"]
    if params or buffers:
        lines.append("        # the problem Model's parameters and buffers (names, shapes, dtypes); the harness loads their values")
    made: set[str] = set()
    for name, shape, dtype in params + buffers:
        parts = name.split(".")
        for i in range(1, len(parts)):
            path = ".".join(parts[:i])
            if path not in made:
                made.add(path)
                parent = "self" if i == 1 else f"self.get_submodule({'.'.join(parts[:i - 1])!r})"
                lines.append(f"        {parent}.add_module({parts[i - 1]!r}, nn.Module())")
        owner = "self" if len(parts) == 1 else f"self.get_submodule({'.'.join(parts[:-1])!r})"
        empty = f"torch.empty({tuple(shape)!r}, dtype={dtype})"
        if (name, shape, dtype) in params:
            lines.append(f"        {owner}.register_parameter({parts[-1]!r}, nn.Parameter({empty}, requires_grad=False))")
        else:
            lines.append(f"        {owner}.register_buffer({parts[-1]!r}, {empty})")
    names = [s.expr for s in inputs]
    lines += ["", f"    def forward(self, {', '.join(names)}):"]
    lines.append(f"        {', '.join(body.args)} = {', '.join(sources[a].expr for a in body.args)}")
    lines.append(f"        device = {names[0]}.device")
    lines += [f"        {line}" for line in body.out]
    return "\n".join(lines)
