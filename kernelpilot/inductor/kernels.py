"""Inductor's Triton kernels in its output code, and how its launcher starts them.

``parse_kernels(code)`` finds every ``async_compile.triton(...)`` kernel module: the ``@triton.jit``
kernel (found by its name, not by position), the other ``@triton.jit`` functions Inductor defines
beside it in the same module (scan combine functions such as ``_triton_helper_fn_add0``, which the
kernel calls and the candidate must therefore define too), its grid type and its source comments.

``launch(kernel, call, chosen)`` writes the ``kernel[grid](args, BLOCKs, num_warps=, num_stages=)``
launch for one ``kernel.run(...)`` of ``call()``, with the grid computed exactly as Inductor's runtime
(``torch/_inductor/runtime/triton_heuristics.py``, the ``GridExpr`` classes) computes it for:

- ``Grid1D`` / ``Grid2D`` / ``Grid3D``: ``cdiv(<axis>numel, <AXIS>BLOCK)`` per axis;
- ``Grid2DWithYZOverflow``: x as Grid2D; the y blocks ``y_raw = cdiv(ynumel, YBLOCK)`` are spread
  over y and z when they exceed CUDA's y limit: ``z = cdiv(y_raw, 65535)``, ``y = cdiv(y_raw, z)``
  (``get_max_y_grid()`` is 65535 in torch 2.11 and 2.14 alike; 2.14 also gives y = 0 when z is 0,
  2.11 divides by zero there, which only an empty tensor reaches). The kernel recombines them as
  ``program_id(1) + program_id(2) * num_programs(1)``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.inductor.helpers import ConversionError

_KERNEL = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)', '''\n(.*?)''', device_str='cuda'\)", re.S | re.M)
GRID_AXES = {"Grid1D": ("x",), "Grid2D": ("x", "y"), "Grid3D": ("x", "y", "z"), "Grid2DWithYZOverflow": ("x", "y")}
MAX_Y_GRID = 65535  # torch._inductor.runtime.runtime_utils.get_max_y_grid()


@dataclass
class Kernel:
    name: str
    source: str  # the kernel module Inductor compiles (heuristics decorator included)
    text: str  # from @triton.jit to the end of the function, verbatim
    params: list[str]
    grid_type: str
    comments: list[str] = field(default_factory=list)
    helpers: dict[str, str] = field(default_factory=dict)  # other @triton.jit functions of the module -> text


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) == "triton.jit" for d in fn.decorator_list)


def _text(lines: list[str], fn: ast.FunctionDef, with_decorators: bool) -> str:
    jit = next(d for d in fn.decorator_list if ast.unparse(d) == "triton.jit")
    start = min(d.lineno for d in fn.decorator_list) if with_decorators else jit.lineno
    return "\n".join(lines[start - 1:fn.end_lineno])


def parse_kernels(code: str) -> dict[str, Kernel]:
    """Variable name in the output code -> Kernel, in the order Inductor defines them."""
    kernels: dict[str, Kernel] = {}
    for match in _KERNEL.finditer(code):
        var, name, source = match.groups()
        tree = ast.parse(source)
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        fn = next((f for f in functions if f.name == name), None)
        if fn is None:  # older Inductor names the module after the kernel; fall back to the decorated one
            fn = next((f for f in functions if any("triton_heuristics" in ast.unparse(d) for d in f.decorator_list)),
                      functions[0] if functions else None)
        if fn is None or not _is_jit(fn):
            raise ConversionError(f"kernel {name} has no @triton.jit function; only Triton kernels can be converted.")
        lines = source.splitlines()
        grid = re.search(r"'grid_type': '(\w+)'", source)
        grid_type = grid.group(1) if grid else "Grid1D"
        if grid_type not in GRID_AXES:
            raise ConversionError(f"kernel {name} uses Inductor's {grid_type} launch grid; only "
                                  f"{', '.join(GRID_AXES)} kernels (pointwise and reduction) can be converted.")
        helpers = {f.name: _text(lines, f, True) for f in functions if f is not fn and _is_jit(f)}
        before = code[:match.start()].splitlines()
        comments: list[str] = []
        for line in reversed(before):
            if not line.startswith("#"):
                break
            comments.insert(0, line)
        comments = [c for c in comments if c.startswith(("# Topologically", "# Source node", "#   ")) and
                    "Tensor \"" not in c and "PlaceHolder" not in c and "call_function" not in c]
        kernels[var] = Kernel(name, source, _text(lines, fn, False), [a.arg for a in fn.args.args], grid_type,
                              comments, helpers)
    return kernels


def shared_helpers(kernels: dict[str, Kernel]) -> dict[str, str]:
    """The module-level ``@triton.jit`` helpers every kernel needs, defined once each.

    Inductor numbers them per kernel module (``_triton_helper_fn_add0`` in each scan kernel); two with
    the same name and text are one function. Two with the same name and different text cannot both be
    module-level functions of one candidate file, so the second is renamed (and the kernel that calls it
    rewritten to call the new name)."""
    out: dict[str, str] = {}
    for k in kernels.values():
        for name, text in k.helpers.items():
            if out.get(name, text) == text:
                out[name] = text
                continue
            new = f"{name}_{k.name}"
            out[new] = re.sub(rf"\b{re.escape(name)}\b", new, text)
            k.text = re.sub(rf"\b{re.escape(name)}\b", new, k.text)
    return out


def _grid(k: Kernel, numels: dict[str, str], block: Any) -> list[str]:
    """The launch grid's expressions; ``block(axis)`` gives the block size expression of an axis."""
    def cdiv(numel: str, b: str) -> str:
        return f"triton.cdiv({numel}, {b})"

    axes = [a for a in GRID_AXES[k.grid_type] if a in numels]
    if k.grid_type != "Grid2DWithYZOverflow" or "y" not in numels:
        return [cdiv(numels[a], block(a)) for a in axes] or ["1"]
    x = cdiv(numels["x"], block("x")) if "x" in numels else "1"
    yb = block("y")
    if numels["y"].isdigit() and yb.isdigit():  # fold the y/z split, as the launcher computes it per call
        y_raw = -(-int(numels["y"]) // int(yb))
        z = -(-y_raw // MAX_Y_GRID)
        y = 0 if z == 0 else -(-y_raw // z)
        return [x, str(y), str(z)]
    y_raw = f"triton.cdiv({numels['y']}, {yb})"
    z = f"triton.cdiv({y_raw}, {MAX_Y_GRID})"
    return [x, f"(0 if {z} == 0 else triton.cdiv({y_raw}, {z}))", z]


def launch(var: str, k: Kernel, call: ast.Call, chosen: dict[str, Any] | None) -> str:
    """The launch statement for ``var.run(*args)``: fixed (``chosen`` config) or autotuned (grid lambda)."""
    args = [ast.unparse(a) for a in call.args]
    values = dict(zip(k.params, call.args))
    numels = {axis: ast.unparse(values[f"{axis}numel"]) for axis in ("x", "y", "z") if f"{axis}numel" in values}
    if chosen is not None:
        kw = chosen["kwargs"]
        grid = _grid(k, numels, lambda a: str(kw.get(a.upper() + "BLOCK", 1)))
        extra = [f"{key}={value!r}" for key, value in kw.items() if key in k.params]
        extra += [f"num_warps={chosen['num_warps']}", f"num_stages={chosen['num_stages']}"]
        return f"{var}[({', '.join(grid)},)]({', '.join(args + extra)})"
    grid = _grid(k, numels, lambda a: f"meta[{a.upper() + 'BLOCK'!r}]")
    return f"{var}[lambda meta: ({', '.join(grid)},)]({', '.join(args)})"
