"""The problem's own Model code, copied into a candidate as ``ModelNew``.

Used where the candidate must be the problem's Model itself in part: a c0 with no Inductor graph (its
forward is the problem's, as torch.compile ran it, eagerly), and a c0 whose graphs read a plain tensor
attribute (``self.hidden = torch.randn(...)`` in ``__init__``: not a parameter or buffer, so the
harness never loads it; only Model's own ``__init__`` run under the harness's seed gives it Model's
value). The module's imports, constants, helper functions and classes come along (the constructor may
use them, e.g. ``batch_size``); ``get_inputs``, ``get_init_inputs``, a ``__main__`` block and bare
expressions do not. Every ``Model`` name token becomes ``ModelNew`` (``super(Model, self)``).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

_DROPPED = {"get_inputs", "get_init_inputs"}


def _rename(source: str) -> str:
    """``Model`` -> ``ModelNew`` for every NAME token (not in strings or comments), layout kept."""
    lines = source.splitlines(keepends=True)
    spots = [t.start for t in tokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == tokenize.NAME and t.string == "Model"]
    for row, col in reversed(spots):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + "ModelNew" + line[col + len("Model"):]
    return "".join(lines)


def problem_definitions(problem: str | Path, forward: str | None = None) -> str:
    """The problem module's definitions with ``Model`` as ``ModelNew``; ``forward`` (source of methods,
    indented for the class body) replaces Model's forward, None keeps it."""
    text = Path(problem).read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()
    chunks: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) or (isinstance(node, ast.FunctionDef) and node.name in _DROPPED):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        block = lines[start - 1:node.end_lineno]
        if isinstance(node, ast.ClassDef) and node.name == "Model" and forward is not None:
            method = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            if method is not None:
                first = min([method.lineno] + [d.lineno for d in method.decorator_list]) - start
                last = (method.end_lineno or method.lineno) - start + 1
                block = block[:first] + block[last:]
            block = [line for line in block] + [""] + forward.rstrip("\n").splitlines()
        chunks.append("\n".join(block))
    return _rename("\n\n".join(chunks) + "\n")
