"""Inductor's ``call(args)``, rewritten statement by statement into plain PyTorch + Triton launches.

- ``kernel.run(args, stream=...)`` becomes ``kernel[grid](args, BLOCKs, num_warps=, num_stages=)``
  (kernels.launch);
- ``empty_strided_cuda`` / ``empty_strided_cpu`` become ``torch.empty_strided(..., device=...)``: the
  CUDA buffers on the forward's device, the CPU ones on the CPU (Inductor keeps a tensor the model
  holds on the CPU there, e.g. a plain attribute never moved to the GPU), ``reinterpret_tensor`` becomes
  ``torch.as_strided``;
- library calls are kept as the torch calls that do the same and declared (libraries.py):
  ``extern_kernels.mm`` -> ``torch.mm`` (cuBLAS), ``torch.ops.aten.avg_pool3d.default(...)`` stays as it is
  (``aten.avg_pool3d``);
- a CPU C++ kernel (``async_compile.cpp_pybinding``: Inductor compiled part of the graph for the CPU)
  cannot run in a Triton candidate. One that only copies flat, contiguous buffers (what Inductor emits
  for a tensor moved between the CPU and the GPU or copied into a CPU attribute) becomes those copies
  (``out.view(-1)[:n].copy_(in.view(-1)[:n])``, memory operations the engine allows); any other is
  refused with a message naming it, as it computes on the CPU what a GPU candidate cannot run.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from kernelpilot.inductor import libraries
from kernelpilot.inductor.helpers import ConversionError, inductor_configs
from kernelpilot.inductor.kernels import Kernel, launch

_DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "get_raw_stream"}
_CPP = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\((\[.*?\]), r'''\n(.*?)'''\)", re.S | re.M)
_LOAD = re.compile(r"auto (tmp\d+) = (?:at::vec::Vectorized<\w+>::loadu\((\w+) \+ static_cast<int64_t>\(x0\)"
                   r"(?:, static_cast<int64_t>\(\d+\))?\)|(\w+)\[static_cast<int64_t>\(x0\)\]);")
_STORE = re.compile(r"(?:(tmp\d+)\.store\((\w+) \+ static_cast<int64_t>\(x0\)(?:, static_cast<int64_t>\(\d+\))?\)|"
                    r"(\w+)\[static_cast<int64_t>\(x0\)\] = (tmp\d+));")


@dataclass
class CppCopy:
    """A CPU C++ kernel that copies ``numel`` elements: (output parameter, input parameter) pairs."""

    params: list[str]
    numel: int
    copies: list[tuple[str, str]]


def parse_cpp_kernels(code: str) -> dict[str, CppCopy | str]:
    """Name -> CppCopy for the copy-only CPU kernels, name -> why not for the others."""
    out: dict[str, CppCopy | str] = {}
    for match in _CPP.finditer(code):
        name, _, source = match.groups()
        params = re.findall(r"\b((?:in_out|in|out)_ptr\d+)\b", source.split("{", 1)[0])
        bounds = set(re.findall(r"x0<static_cast<int64_t>\((\d+)L\)", source))
        loads = {m[0]: m[1] or m[2] for m in _LOAD.findall(source)}
        stores = [(m[1] or m[2], m[0] or m[3]) for m in _STORE.findall(source)]
        statements = [s.strip() for s in source.splitlines() if s.strip().endswith(";")]
        plain = len(statements) == len(loads) + len(stores) + sum(s.startswith("int tid") for s in statements)
        if len(bounds) == 1 and stores and plain and all(t in loads for _, t in stores):
            out[name] = CppCopy(params, int(bounds.pop()), [(dst, loads[t]) for dst, t in stores])
        else:
            out[name] = (f"Inductor compiled part of this graph as the CPU C++ kernel {name}, which computes on "
                         "the CPU (not only copies): a Triton candidate cannot run it; move the model's CPU "
                         "tensors to the GPU in the problem, or write that part as a kernel.")
    return out


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def size_guard(name: str, shape: Any, stride: Any) -> list[str]:
    """Inductor's own ``assert_size_stride`` as a line of the forward: its kernels have the recorded sizes as
    constants and would read past the end of a smaller input (an illegal memory access that names no shape), so an
    input of another size or layout is refused with both. No line for a size Inductor left symbolic."""
    if not all(isinstance(v, tuple) and all(isinstance(d, int) for d in v) for v in (shape, stride)):
        return []
    return [f"if tuple({name}.shape) != {shape!r} or tuple({name}.stride()) != {stride!r}: raise ValueError("
            f"f\"torch.compile specialised these kernels to a {list(shape)} input (strides {list(stride)}); this "
            f"one is {{list({name}.shape)}} (strides {{list({name}.stride())}}): record torch.compile for this shape "
            f"(kernelpilot init --from-inductor) or make the kernels take any size\")"]


class Body:
    """One graph's call() statements, rewritten into a forward's (``out``); ``args`` are its inputs."""

    def __init__(self, code: str, kernels: dict[str, Kernel], configs: dict[str, Any] | None) -> None:
        self.lines = code.splitlines()
        self.kernels = kernels
        self.cpp = parse_cpp_kernels(code)
        self.configs = configs
        self.args: list[str] = []
        self.asserts: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.libraries: list[str] = []
        self.autotuned: dict[str, list[dict[str, Any]]] = {}
        self.out: list[str] = []
        self.returns: list[str] = []

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
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            value = self.rewrite(ast.Expr(stmt.value)).value  # type: ignore[attr-defined]
            self.returns = [ast.unparse(e) for e in (value.elts if isinstance(value, ast.Tuple) else [value])]
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = ast.unparse(stmt.value.func)
            if func == "args.clear" or func.endswith("set_device"):
                return
            if func == "assert_size_stride" and isinstance(stmt.value.args[0], ast.Name):
                name, shape, stride = stmt.value.args[0].id, _literal(stmt.value.args[1]), _literal(stmt.value.args[2])
                self.asserts[name] = (tuple(shape), tuple(stride))
                if name in self.args:  # an input's; Inductor's checks of its library calls' outputs stay out
                    self.out += size_guard(name, shape, stride)
                return
            if func in _DROPPED_CALLS:
                return
            if func.endswith(".run") and func[:-4] in self.kernels:
                self.out.append(self.launch(func[:-4], stmt.value))
                return
            if func in self.cpp:
                self.out += self.cpp_call(func, stmt.value)
                return
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
                ast.unparse(stmt.value.func) in _DROPPED_CALLS:
            return
        self.out.append(ast.unparse(self.rewrite(stmt)))

    def cpp_call(self, name: str, call: ast.Call) -> list[str]:
        kernel = self.cpp[name]
        if isinstance(kernel, str):
            raise ConversionError(kernel)
        values = dict(zip(kernel.params, (ast.unparse(a) for a in call.args)))
        lines = [f"# Inductor's CPU kernel {name}: a flat copy of {kernel.numel} elements"]
        for dst, src in kernel.copies:
            lines.append(f"{values[dst]}.view(-1)[:{kernel.numel}].copy_({values[src]}.view(-1)[:{kernel.numel}])")
        return lines

    def rewrite(self, stmt: ast.stmt) -> ast.stmt:
        body = self

        class Rewriter(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                return body.call(node)

        return ast.fix_missing_locations(Rewriter().visit(stmt))

    def call(self, node: ast.Call) -> ast.AST:
        func = ast.unparse(node.func)
        if func in ("empty_strided_cuda", "empty_strided_cpu", "empty_strided_cpu_pinned"):
            size, stride, dtype = node.args
            where = "device" if func == "empty_strided_cuda" else "'cpu'"
            pinned = ", pin_memory=True" if func.endswith("pinned") else ""
            return ast.parse(f"torch.empty_strided({ast.unparse(size)}, {ast.unparse(stride)}, "
                             f"dtype={ast.unparse(dtype)}, device={where}{pinned})", mode="eval").body
        if func == "reinterpret_tensor":
            node.func = ast.parse("torch.as_strided", mode="eval").body
            return node
        if func.startswith("extern_kernels."):
            op = func.split(".", 1)[1]
            if op not in libraries.EXTERN_CALLS:
                raise ConversionError(f"Inductor calls extern_kernels.{op}, which has no torch equivalent here.")
            torch_call, library = libraries.EXTERN_CALLS[op]
            libraries.add(self.libraries, (library,))
            node.func = ast.parse(torch_call, mode="eval").body
            return node
        if isinstance(node.func, ast.Name) and node.func.id.startswith(("empty_strided", "alloc_from_pool")):
            raise ConversionError(f"the output code calls {node.func.id}: only CUDA and CPU buffers can be converted.")
        parts = func.split(".")
        if parts[0] == "aten" or parts[:3] == ["torch", "ops", "aten"]:
            # an ATen operator Inductor has no lowering for: torch.compile calls it, and so does the candidate
            op = parts[1] if parts[0] == "aten" else parts[3]
            libraries.add(self.libraries, libraries.aten_declaration(op))
            node.func = ast.parse("torch.ops.aten." + ".".join(parts[1 if parts[0] == "aten" else 3:]),
                                  mode="eval").body
            return node
        if func.startswith("torch.ops."):
            raise ConversionError(f"Inductor calls {func}, an operator outside ATen: the candidate cannot call it.")
        return node

    def launch(self, var: str, call: ast.Call) -> str:
        k = self.kernels[var]
        chosen = (self.configs or {}).get(k.name)
        if chosen is None:
            options = inductor_configs(k.source)
            if len(options) == 1:
                chosen = options[0]
            else:
                self.autotuned[var] = options
        return launch(var, k, call, chosen)
