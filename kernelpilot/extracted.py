"""The layout of a problem extracted from a user's script (``kernelpilot hotspots --extract``), which
several layers consult: the profiler writes it, approval adds the drop-in operator beside the approved
candidate, and the static policy must tell that generated code from the candidate's own.

    <problem dir>/problem.py, origin.json          (where it came from in the script)
    <problem dir>/candidate/                       (the candidate, as any problem's)
    <problem dir>/candidate/dropin.py, dropin_swap.py, _build/   (written by approval: kernelpilot's code)

A candidate whose ``ModelNew`` defines ``backward`` is a training drop-in: approval registers its own backward,
and its verdict says that its times are forwards only.
"""

from __future__ import annotations

import ast
from pathlib import Path

ORIGIN_FILE = "origin.json"
DROPIN_FILE = "dropin.py"
SWAP_FILE = "dropin_swap.py"
BUILD_DIR = "_build"  # the drop-in's prebuilt extension


def problem_dir_of(candidate_dir: Path) -> Path | None:
    """The extracted problem directory a candidate belongs to (``<problem dir>/candidate``), if any."""
    parent = candidate_dir.parent
    return parent if (parent / ORIGIN_FILE).is_file() and (parent / "problem.py").is_file() else None


def generated_files(candidate_dir: Path) -> frozenset[str]:
    """The names approval writes into the candidate directory of an extracted problem (the operator, its
    install, the extension's ``_build/``): kernelpilot's code, not the candidate's. The static policy
    leaves them unchecked and not importable by the candidate, so an approved candidate can be evaluated
    again (a later session, ``kernelpilot eval``) instead of being refused for this file's imports."""
    return frozenset({DROPIN_FILE, SWAP_FILE, BUILD_DIR}) if problem_dir_of(candidate_dir) is not None else frozenset()


def modelnew_has_backward(tree: ast.AST) -> bool:
    """Whether a parsed candidate's ``ModelNew`` class has a ``backward`` method (wherever the class stands)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return any(isinstance(item, ast.FunctionDef) and item.name == "backward" for item in node.body)
    return False
