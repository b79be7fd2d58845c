"""Which calls of a candidate's module compile a torch extension: ``load_inline`` and ``cpp_extension.load``,
however they were imported (read, not run; nothing here imports torch).

Published KernelBench solutions reach them in every way Python allows::

    from torch.utils.cpp_extension import load_inline, load     load_inline(...), load(...)
    from torch.utils.cpp_extension import load_inline as li     li(...)
    from torch.utils import cpp_extension                       cpp_extension.load(...)
    import torch.utils.cpp_extension as ext                     ext.load(...)
    import torch                                                torch.utils.cpp_extension.load_inline(...)

A bare ``load(...)`` counts only when ``load`` was imported from ``torch.utils.cpp_extension`` (``torch.load``,
``json.load`` and a ``load`` of the candidate's own do not); a call named ``load_inline`` counts however it
was reached (the name is torch's).
"""

from __future__ import annotations

import ast

MODULE = "torch.utils.cpp_extension"
BUILDERS = ("load_inline", "load")


def _bindings(tree: ast.AST) -> tuple[dict[str, str], set[str]]:
    """Local names bound to the builders (name -> builder) and to the cpp_extension module itself."""
    functions: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == MODULE:
            for a in node.names:
                if a.name == "*":
                    functions.update({b: b for b in BUILDERS})
                elif a.name in BUILDERS:
                    functions[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.utils":
            modules.update(a.asname or a.name for a in node.names if a.name == "cpp_extension")
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == MODULE and a.asname)
    return functions, modules


def _is_module(expr: ast.expr, modules: set[str]) -> bool:
    """``cpp_extension`` as bound here, or any ``<...>.cpp_extension`` attribute (``torch.utils.cpp_extension``)."""
    if isinstance(expr, ast.Name):
        return expr.id in modules or expr.id == "cpp_extension"
    return isinstance(expr, ast.Attribute) and expr.attr == "cpp_extension"


def builder_of(call: ast.Call, functions: dict[str, str], modules: set[str]) -> str | None:
    """``load_inline`` or ``load`` when this call compiles an extension, else None."""
    f = call.func
    if isinstance(f, ast.Name):
        if f.id in functions:
            return functions[f.id]
        return "load_inline" if f.id == "load_inline" else None
    if isinstance(f, ast.Attribute):
        if f.attr == "load_inline":
            return "load_inline"
        if f.attr == "load" and _is_module(f.value, modules):
            return "load"
    return None


def compile_calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    """Every call in the module that compiles an extension, with the builder it calls."""
    functions, modules = _bindings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            which = builder_of(node, functions, modules)
            if which:
                out.append((node, which))
    return out
