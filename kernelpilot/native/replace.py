"""In kernelpilot's worker: import a candidate's extension with the kernels of its last device-only build.

``load_extension`` calls :func:`device_module` when the engine asked for device-only builds
(``KERNELPILOT_DEVICE_BUILDS=1`` in the worker's environment), then :func:`full_module` (the last full build, as
it is). The library imported is the full build's
snapshot; the cubins of the device-only build replace its kernels (``kp_use_cubins``, kernelpilot/launch.h).
Used only while the files on disk are exactly those the cubins were compiled from; otherwise the caller
builds and imports as usual, and :func:`use_cubins` with no cubins puts the full build's kernels back.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from kernelpilot.errors import KernelpilotError
from kernelpilot.extension_reload import file_fingerprint, fresh_module
from kernelpilot.native.records import read_device, read_full
from kernelpilot.native.sources import digest

ENV = "KERNELPILOT_DEVICE_BUILDS"
HOOK = "kp_use_cubins"


class ReplacementError(KernelpilotError):
    """The cubins of a device-only build could not be loaded into the extension."""

    kind = "build_failed"


@dataclass
class _Snapshot:
    """What fresh_module needs of a build: the library's path, the build directory, the module name."""

    name: str
    library: Path
    build_dir: Path


def enabled() -> bool:
    return os.environ.get(ENV, "") == "1"


def device_module(name: str, build_dir: Path) -> ModuleType | None:
    """The extension with the device-only build's kernels, or None when that build does not match the files."""
    record = read_device(build_dir)
    if record is None or not _current(record.library, record.sources):
        return None
    return _snapshot_module(name, build_dir, record.library, [Path(c) for c in record.cubins])


def full_module(name: str, build_dir: Path, library: Path) -> ModuleType | None:
    """The extension of the last full build, imported from its snapshot with its own kernels, or None (the caller
    builds). Used while the files on disk are exactly those that build read and ``library`` is still the library
    it made: the build step has just built it (a host edit, a new header, the first build), and torch's builder
    would only confirm that nothing needs compiling (its ninja run and compiler checks: 0.15 s on our CPU machine,
    0.6-0.9 s in the H100's worker, 2026-12-07) before importing the same library."""
    record = read_full(build_dir)
    if record is None or not library.is_file() or not _current(record.library, record.sources):
        return None
    if file_fingerprint(library) != record.fingerprint:
        return None  # built again since, without a record of that build: the caller builds
    return _snapshot_module(name, build_dir, record.library, [])  # the full build's own kernels


def _current(snapshot: str, sources: dict[str, str]) -> bool:
    """Whether a build's library snapshot is there and the files on disk are those it was built from (else the
    caller builds)."""
    return Path(snapshot).is_file() and digest([Path(p) for p in sources]) == sources


def _snapshot_module(name: str, build_dir: Path, snapshot: str, cubins: list[Path]) -> ModuleType:
    """The module of a build's library snapshot, with ``cubins``' kernels in it (none: its own, whatever an earlier
    edit loaded)."""
    import torch  # noqa: F401  # the library needs torch's own loaded first (torch's builder would import it)

    module = fresh_module(_Snapshot(name, Path(snapshot), build_dir), None)
    use_cubins(module, cubins)
    return module


def use_cubins(module: ModuleType, cubins: list[Path]) -> None:
    """Replace the kernels of ``module``'s library by those of ``cubins`` (none: the library's own)."""
    path = getattr(module, "__file__", None)
    if not path:
        return
    library = ctypes.CDLL(path, mode=os.RTLD_NOW | getattr(os, "RTLD_NOLOAD", 0))
    hook = getattr(library, HOOK, None)
    if hook is None:
        if cubins:
            raise ReplacementError(f"{Path(path).name} has no {HOOK}: binding.cpp must include kernelpilot/launch.h")
        return
    hook.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    hook.restype = ctypes.c_int
    names = (ctypes.c_char_p * max(1, len(cubins)))(*[str(c).encode() for c in cubins])
    error = ctypes.create_string_buffer(1024)
    if hook(names, len(cubins), error, len(error)) != 0:
        raise ReplacementError(f"the edited kernels could not be loaded: {error.value.decode(errors='replace')}")
