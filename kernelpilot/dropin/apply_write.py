"""`kernelpilot apply --write`: the install(model) call in the user's script, shown, then one commit.

Where it goes: the script is run for one step and, when it first calls its model, the innermost
frame of the script is searched for the variable holding the model; the call goes right after the
last statement of that scope (before the call) assigning that variable. Beside the script,
``kernelpilot_kernels.py`` holds ``install(model)``: it loads each approved ``dropin.py`` by its
path (torch only, no kernelpilot). Both files change in one git commit, only after confirmation
(``--yes`` confirms), and only when the script has no uncommitted changes.
"""

from __future__ import annotations

import ast
import difflib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.script_run import run_script

MODULE_NAME = "kernelpilot_kernels"

INSTALLER = '''"""Approved kernels from kernelpilot, swapped into the model by install(model).

Written by `kernelpilot apply --write`; each entry is a drop-in operator written when its kernel was
approved (torch only: kernelpilot need not be installed).
"""

import importlib.util
import sys
from pathlib import Path

DROPINS = {dropins!r}  # relative to this file


def install(model):
    """Swap every approved kernel into ``model``; returns the module paths swapped."""
    swapped = []
    for rel in DROPINS:
        path = (Path(__file__).resolve().parent / rel).resolve()
        name = "kernelpilot_dropin_" + path.parent.parent.name.replace("-", "_")
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        swapped += module.install(model)
    return swapped
'''


@dataclass
class Site:
    variable: str
    call_line: int


def find_site(script: Path, argv: list[str]) -> Site:
    found: list[Site] = []
    target = str(script.resolve())

    def on_root(root: Any) -> None:
        frame = sys._getframe()
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename) == target:
                for name, value in {**frame.f_globals, **frame.f_locals}.items():
                    if value is root or getattr(value, "_orig_mod", None) is root:
                        found.append(Site(name, frame.f_lineno))
                        return
                break
            frame = frame.f_back  # type: ignore[assignment]

    run_script(script, argv, steps=1, on_root=on_root, keep_compile=True)
    if not found:
        raise KernelpilotError(f"could not find the variable that holds the model in {script}; add "
                               f"`from {MODULE_NAME} import install; install(model)` after you create it.")
    return found[0]


def insertion(source: str, site: Site) -> tuple[int, str]:
    """(line after which the call goes, its indentation)."""
    tree = ast.parse(source)
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and node.end_lineno is not None
                and node.end_lineno < site.call_line):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == site.variable for t in targets):
                if best is None or node.lineno > best.lineno:
                    best = node
    if best is None or best.end_lineno is None:
        raise KernelpilotError(f"could not find where `{site.variable}` is assigned in the script; add "
                               f"`from {MODULE_NAME} import install; install({site.variable})` after you create it.")
    return best.end_lineno, " " * best.col_offset


def _git(cwd: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise KernelpilotError(f"`git {args[0]}` failed: {(res.stderr.strip().splitlines() or ['?'])[-1]}")
    return res.stdout.strip()


def write_install(script: Path, dropins: list[Path], argv: list[str], *, yes: bool = False) -> str | None:
    """Show the change, apply it on confirmation, commit it; returns the commit (None if declined)."""
    script = script.resolve()
    try:
        top = Path(_git(script.parent, "rev-parse", "--show-toplevel"))
    except KernelpilotError:
        raise KernelpilotError(f"{script} is not in a git repository; --write makes one commit, so run `git init` "
                               "first.") from None
    if _git(top, "status", "--porcelain", "--", str(script)):
        raise KernelpilotError(f"{script.name} has uncommitted changes; commit them first so the install is one commit "
                               "of its own.")
    installer = script.parent / f"{MODULE_NAME}.py"
    rels = [os.path.relpath(d.resolve(), script.parent) for d in dropins]
    new_installer = INSTALLER.format(dropins=rels)
    source = script.read_text()
    already = f"from {MODULE_NAME} import install" in source
    new_source = source
    if not already:
        site = find_site(script, argv)
        after, indent = insertion(source, site)
        lines = source.splitlines(keepends=True)
        call = (f"{indent}from {MODULE_NAME} import install  # kernelpilot apply: approved kernels\n"
                f"{indent}install({site.variable})\n")
        new_source = "".join(lines[:after]) + call + "".join(lines[after:])
    old_installer = installer.read_text() if installer.is_file() else ""
    diff = "".join(difflib.unified_diff(source.splitlines(keepends=True), new_source.splitlines(keepends=True),
                                        f"a/{script.name}", f"b/{script.name}"))
    diff += "".join(difflib.unified_diff(old_installer.splitlines(keepends=True),
                                         new_installer.splitlines(keepends=True),
                                         f"a/{installer.name}", f"b/{installer.name}"))
    if not diff:
        print("the script already installs these kernels; nothing to change")
        return None
    print(diff, end="")
    if not yes:
        answer = input("apply this change and commit it? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("nothing was changed")
            return None
    script.write_text(new_source)
    installer.write_text(new_installer)
    _git(top, "add", "--", str(script), str(installer))
    names = ", ".join(d.parent.parent.name for d in dropins)
    _git(top, "commit", "-q", "-m", f"kernelpilot apply: swap in the approved kernels ({names})", "--", str(script),
         str(installer))
    commit = _git(top, "rev-parse", "HEAD")
    print(f"committed {commit[:12]}: {script.name} calls install() from {installer.name}")
    return commit
