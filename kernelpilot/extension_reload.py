"""Importing a freshly built extension library in a process that may hold an older build of it.

Python, pybind11 and the dynamic loader all hand back the module first imported under a name and
path. ``fresh_module`` imports a content-addressed copy of a changed library instead, and keeps one
module per (name, content), so an unchanged rebuild reuses the module already in use.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

# name -> (library fingerprint, module) of the extensions this process has imported
_LOADED: dict[str, tuple[str, ModuleType]] = {}
# (name, library fingerprint) -> module, for every build this process has imported: going back to an
# earlier build (an edit reverted) reuses that module instead of loading the same library again
_BY_FINGERPRINT: dict[tuple[str, str], ModuleType] = {}


def already_loaded(name: str) -> bool:
    """Whether this process imported an extension of this name through ``fresh_module``."""
    return name in _LOADED


def fresh_module(spec: Any, module: Any) -> ModuleType:
    """The module for the library just built, even when this process imported an older build of it."""
    fingerprint = file_fingerprint(spec.library)
    previous = _LOADED.get(spec.name)
    if previous is not None and previous[0] == fingerprint:
        return previous[1]  # unchanged: the module this process already uses (maybe a reloaded copy)
    if (spec.name, fingerprint) in _BY_FINGERPRINT:
        module = _BY_FINGERPRINT[(spec.name, fingerprint)]
        sys.modules[spec.name] = module
    elif previous is not None or module is None:
        # Python, pybind11 and the dynamic loader all hand back the old module for the same name
        # and path: import a copy under a content-addressed file name instead.
        import importlib.util

        copies = spec.build_dir / "reloads"
        copies.mkdir(exist_ok=True)
        copy = copies / f"{spec.name}-{fingerprint[:16]}{spec.library.suffix}"
        if not copy.exists():
            shutil.copy2(spec.library, copy)
        _prune(copies, keep=copy)
        forget_pybind11_module(spec.name)
        import_spec = importlib.util.spec_from_file_location(spec.name, copy)
        assert import_spec is not None and import_spec.loader is not None
        module = importlib.util.module_from_spec(import_spec)
        import_spec.loader.exec_module(module)
        sys.modules[spec.name] = module
    _LOADED[spec.name] = (fingerprint, module)
    _BY_FINGERPRINT[(spec.name, fingerprint)] = module
    return module


def pybind11_module_cache() -> dict[str, Any] | None:
    """pybind11 >= 3's table of the modules it initialised, by name (in the interpreter state dict): a
    module imported again under a cached name is handed the cached module, its init skipped. None when
    this interpreter has none (pybind11 2, or nothing imported yet)."""
    import ctypes

    try:
        api = ctypes.pythonapi
        api.PyInterpreterState_Get.restype = ctypes.c_void_p
        api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
        # PyInterpreterState_GetDict returns a *borrowed* reference. With ``restype = py_object`` ctypes
        # takes the result as a new reference and releases it when the Python object goes away: every
        # call then takes one reference from the interpreter's dict, which holds pybind11's internals,
        # until the dict is freed while in use and the process crashes later, somewhere else (the warm
        # worker's SIGSEGVs of 2026-12-01/02, measured on the H200). Read the pointer as a plain address
        # and convert it with cast(...).value, which takes a reference of its own.
        api.PyInterpreterState_GetDict.restype = ctypes.c_void_p
        address = api.PyInterpreterState_GetDict(api.PyInterpreterState_Get())
        if not address:
            return None
        state = ctypes.cast(address, ctypes.py_object).value
    except (AttributeError, ValueError, OSError):
        return None
    cache = state.get("__pybind11_module_cache") if isinstance(state, dict) else None
    return cache if isinstance(cache, dict) else None


def forget_pybind11_module(name: str) -> None:
    """Drop ``name`` from pybind11's module table so a new library of that name is created and initialised."""
    cache = pybind11_module_cache()
    if cache is not None:
        cache.pop(name, None)


def _prune(copies: Path, *, keep: Path, limit: int = 8) -> None:
    """Delete all but the newest ``limit`` reload copies (a loaded library stays mapped when deleted)."""
    files = sorted(copies.glob("*"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in files[limit:]:
        if old != keep:
            old.unlink(missing_ok=True)


def file_fingerprint(path: Path) -> str:
    """sha256 of a file's bytes (a library: which build it is)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
