"""What a CuTe-DSL candidate's source says, read statically (ast, nothing runs): its ``@cute.kernel`` functions
(the candidate's own kernels, for the audit), its ``@cute.jit`` host functions, and the names the DSL gives
the kernels it compiles (``kernel_cutlass_<function>_<argument types>_<n>``), which the audit matches.

``cute`` here is whatever name the module binds to ``cutlass.cute`` (``import cutlass.cute as cute``,
``from cutlass import cute``) or the dotted ``cutlass.cute`` itself. candidate.py uses it to recognise the
language, policy.py's tables name what the DSL may use.
"""

from __future__ import annotations

import ast
import re

from kernelpilot.evaluation.static.python_checker import dotted_name

CUTE_MODULE = "cutlass.cute"
# the prefix the DSL puts before the name of every kernel it compiles (seen in its PTX, cubin and the profiler)
DSL_KERNEL_PREFIX = "kernel_cutlass_"


def cute_aliases(tree: ast.Module) -> set[str]:
    """The dotted names that mean ``cutlass.cute`` in this module."""
    names = {CUTE_MODULE}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == CUTE_MODULE and a.asname:
                    names.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "cutlass" and not node.level:
            names |= {a.asname or a.name for a in node.names if a.name == "cute"}
    return names


def _decorated(node: ast.AST, aliases: set[str], what: str) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        dotted = dotted_name(target)
        if dotted.rsplit(".", 1)[-1] == what and dotted.rsplit(".", 1)[0] in aliases:
            return True
    return False


def cute_kernel_names(tree: ast.Module) -> list[str]:
    """Names of the ``@cute.kernel`` functions of a module, at module level or in a class (QuACK writes
    its kernels as methods)."""
    aliases = cute_aliases(tree)
    return [n.name for n in ast.walk(tree) if _decorated(n, aliases, "kernel")]  # type: ignore[attr-defined]


def cute_jit_names(tree: ast.Module) -> list[str]:
    """Names of the ``@cute.jit`` (host) functions of a module."""
    aliases = cute_aliases(tree)
    return [n.name for n in ast.walk(tree) if _decorated(n, aliases, "jit")]  # type: ignore[attr-defined]


def has_cute_kernels(tree: ast.Module) -> bool:
    """Whether the module defines a ``@cute.kernel`` or ``@cute.jit`` function: a CuTe-DSL candidate."""
    return bool(cute_kernel_names(tree) or cute_jit_names(tree))


def dsl_kernel_function(recorded: str) -> str | None:
    """The part after the DSL's prefix of a recorded kernel name (``kernel_cutlass_add_kernel_tensorptr..._0``
    -> ``add_kernel_tensorptr..._0``), or None when the name is not one the DSL gives."""
    name = re.sub(r"^void\s+", "", recorded.strip()).split("(")[0]
    return name[len(DSL_KERNEL_PREFIX):] if name.startswith(DSL_KERNEL_PREFIX) else None


def names_dsl_kernel(recorded: str, own: str) -> bool:
    """Whether a recorded kernel is the DSL's compilation of the candidate's ``@cute.kernel`` function ``own``:
    the DSL's prefix, then the function's name and an underscore (the argument types follow)."""
    rest = dsl_kernel_function(recorded)
    return bool(own) and rest is not None and (rest == own or rest.startswith(own + "_"))
