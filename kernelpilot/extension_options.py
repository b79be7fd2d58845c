"""The build options a candidate's ``model_new.py`` passes to ``load_extension``, read from its source without
running it (``python -m kernelpilot.extension --build DIR``, the engine's build step, builds with the same flags)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kernelpilot.errors import ExtensionBuildError

# keyword arguments of load_extension that model_new.py may pass (as literals)
BUILD_OPTIONS = ("name", "arch", "arch_specific", "extra_cuda_cflags", "extra_cflags", "extra_ldflags")


def options_from_source(model_file: Path) -> dict[str, Any]:
    """The literal keyword arguments of the ``load_extension(...)`` call in ``model_file``."""
    try:
        tree = ast.parse(model_file.read_text(encoding="utf-8"), filename=str(model_file))
    except SyntaxError as exc:
        raise ExtensionBuildError(
            f"{model_file.name} line {exc.lineno}: syntax error ({exc.msg}): fix the Python source."
        ) from exc
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called != "load_extension":
            continue
        options: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg not in BUILD_OPTIONS:
                continue
            try:
                value = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, RecursionError) as exc:
                raise ExtensionBuildError(
                    f"{model_file.name} line {kw.value.lineno}: load_extension({kw.arg}=...) must be a "
                    "literal (a string, bool or list of strings) so the build step can read it."
                ) from exc
            options[kw.arg] = _checked_option(kw.arg, value, model_file, kw.value.lineno)
        return options
    return {}


def _checked_option(key: str, value: Any, model_file: Path, line: int) -> Any:
    if key.startswith("extra_"):
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        kind = "a list of strings"
    elif key == "arch_specific":
        ok, kind = isinstance(value, bool), "True or False"
    else:
        ok, kind = value is None or isinstance(value, str), "a string"
    if not ok:
        raise ExtensionBuildError(
            f"{model_file.name} line {line}: load_extension({key}=...) must be {kind}, not {value!r}."
        )
    return list(value) if isinstance(value, tuple) else value
