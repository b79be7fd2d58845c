"""The package's layout holds while other work grows it (issue 50): no import cycle, no module past 400 lines, no
function past 80, no private name imported across modules, packages that are packages, typed settings in the
engine, and `except ImportError` only around optional third-party packages (a missing piece of kernelpilot is an
internal error, never a skipped check). tests/layout.py reads the sources; `python tests/layout.py` prints it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import layout  # noqa: E402 - tests/layout.py, beside this file

MODULES = layout.modules()
MAX_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_ANY_IN_EVALUATION = 20


def test_no_import_cycles() -> None:
    found = layout.cycles(MODULES)
    assert not found, "import cycles (strongly connected components):\n" + "\n".join(", ".join(c) for c in found)


def test_the_cycle_finder_sees_a_cycle_through_a_function_import() -> None:
    a = layout.Module("kp.a", Path("a.py"), 1, imports={"kp.b"})
    b = layout.Module("kp.b", Path("b.py"), 1, imports={"kp.c"})
    c = layout.Module("kp.c", Path("c.py"), 1, imports={"kp.a"})
    d = layout.Module("kp.d", Path("d.py"), 1, imports={"kp.a"})
    assert layout.cycles({m.name: m for m in (a, b, c, d)}) == [["kp.a", "kp.b", "kp.c"]]


def test_imports_are_read_wherever_they_sit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "kernelpilot"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "x.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from kernelpilot import y\n\ndef f():\n    from kernelpilot.sub import z\n")
    (pkg / "sub" / "z.py").write_text("from kernelpilot.sub.x import _hidden\n")
    (pkg / "y.py").write_text("")
    monkeypatch.setattr(layout, "ROOT", tmp_path)
    monkeypatch.setattr(layout, "PACKAGE", pkg)
    found = layout.modules()
    # in a function: counted, with the package's __init__ (`from pkg import x`); under TYPE_CHECKING: not
    assert found["kernelpilot.sub.x"].imports == {"kernelpilot.sub", "kernelpilot.sub.z"}
    assert found["kernelpilot.sub.z"].private == ["kernelpilot.sub.x._hidden"]
    assert layout.cycles(found) == [["kernelpilot.sub.x", "kernelpilot.sub.z"]]


def test_no_module_is_longer_than_400_lines() -> None:
    long = {m.name: m.lines for m in MODULES.values() if m.lines > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them along responsibilities): {long}"


def test_no_function_is_longer_than_80_lines() -> None:
    long = []
    for mod in MODULES.values():
        for node in ast.walk(ast.parse(mod.path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{mod.name}.{node.name} ({length})")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_private_name_is_imported_from_another_module() -> None:
    private = {m.name: m.private for m in MODULES.values() if m.private}
    assert not private, f"private names imported across modules (make them public or move them): {private}"


def test_every_folder_of_the_package_is_a_package() -> None:
    data = layout.PACKAGE / "data"  # files shipped as data (doctor's candidates), never imported as modules
    folders = {p.parent for p in layout.PACKAGE.rglob("*.py")
               if "__pycache__" not in p.parts and data not in p.parents}
    missing = sorted(str(f.relative_to(layout.ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"folders of Python modules without __init__.py: {missing}"


def test_the_engine_takes_typed_parameters() -> None:
    count = sum(m.any_params for m in MODULES.values() if m.name.startswith("kernelpilot.evaluation"))
    assert count <= MAX_ANY_IN_EVALUATION, f"{count} parameters typed Any in kernelpilot/evaluation"


def _imported(node: ast.AST) -> list[str]:
    names: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            names += [a.name for a in sub.names]
        elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
            names.append(sub.module)
        elif isinstance(sub, ast.ImportFrom) and sub.level:
            names.append("kernelpilot (relative)")
    return names


def test_import_errors_are_caught_only_around_third_party_packages() -> None:
    wrong = []
    for mod in MODULES.values():
        for node in ast.walk(ast.parse(mod.path.read_text())):
            if not isinstance(node, ast.Try):
                continue
            caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if not any("ImportError" in c or "ModuleNotFoundError" in c for c in caught):
                continue
            ours = [n for stmt in node.body for n in _imported(stmt) if n.startswith("kernelpilot")]
            if ours:
                wrong.append(f"{mod.name}:{node.lineno} ({', '.join(ours)})")
    assert not wrong, f"an ImportError of kernelpilot's own code must fail, not fall back: {wrong}"
