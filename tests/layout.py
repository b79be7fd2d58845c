"""The package's layout, read from its sources: import edges, cycles, module sizes, private names imported.

Used by tests/test_layout.py; ``python tests/layout.py`` prints what it finds.
An import counts wherever it sits (in a function too) except under ``if TYPE_CHECKING:``; ``from pkg import x``
counts ``pkg/__init__`` as well as ``pkg.x`` when x is a module.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kernelpilot"


@dataclass
class Module:
    name: str
    path: Path
    lines: int
    imports: set[str] = field(default_factory=set)
    private: list[str] = field(default_factory=list)  # "module.name" of private names imported from elsewhere
    any_params: int = 0


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for sub in child.orelse:
                yield sub
                yield from _walk(sub)
            continue
        yield child
        yield from _walk(child)


def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        found[module_name(path)] = Module(module_name(path), path, len(text.splitlines()))
    for mod in found.values():
        tree = ast.parse(mod.path.read_text())
        package = mod.name if mod.path.name == "__init__.py" else mod.name.rpartition(".")[0]
        for node in _walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("kernelpilot"):
                        mod.imports.add(_existing(alias.name, found))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")
                    parent = parent[: len(parent) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                if not base.startswith("kernelpilot"):
                    continue
                mod.imports.add(_existing(base, found))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in found:
                        mod.imports.add(sub)
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        mod.private.append(f"{base}.{alias.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                mod.any_params += sum(1 for a in args if isinstance(a.annotation, ast.Name)
                                      and a.annotation.id == "Any")
        mod.imports.discard(mod.name)
    return found


def _existing(name: str, found: dict[str, Module]) -> str:
    while name not in found and "." in name:
        name = name.rpartition(".")[0]
    return name


def cycles(found: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in found[v].imports:
            if w not in found:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(found):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    found = modules()
    cs = cycles(found)
    print(f"{len(found)} modules; {len(cs)} cycles")
    for c in cs:
        print(f"  {len(c)}: {', '.join(c)}")
    print("over 400 lines:", ", ".join(f"{m.name} {m.lines}" for m in found.values() if m.lines > 400))
    print("private names imported:", sum(len(m.private) for m in found.values()))
    for m in found.values():
        for p in m.private:
            print(f"  {m.name}: {p}")
    ev = [m for m in found.values() if m.name.startswith("kernelpilot.evaluation")]
    print("Any parameters: evaluation", sum(m.any_params for m in ev), "all", sum(m.any_params for m in found.values()))
