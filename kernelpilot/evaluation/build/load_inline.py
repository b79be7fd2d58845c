"""Single-file (``load_inline``) candidates: where they build, the record of a finished build, and loading
a build in a warm worker that already loaded another candidate's extension of the same name.

Nothing here imports torch at module level.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelpilot.evaluation.candidate import Candidate
from kernelpilot.evaluation.static.compile_calls import compile_calls
from kernelpilot.verdict import BuildReport, from_plain

INLINE_RECORD = "kernelpilot-inline.json"  # the report of a finished single-file build in its directory


def default_single_file_dir(candidate: Candidate, env: Mapping[str, str] | None = None) -> Path:
    """TORCH_EXTENSIONS_DIR for a single-file candidate: keyed on its exact bytes and the toolchain.

    ``load_inline`` compiles whatever the module hands it at import, so the file's content (with the
    torch version, the target architecture, the toolkit, the compiler and the Python that builds it)
    determines the build: the same candidate, wherever it lies and however often it is evaluated,
    is built once (:data:`INLINE_RECORD` marks a finished build).
    """
    from importlib.metadata import PackageNotFoundError, version

    import platformdirs

    env = os.environ if env is None else env
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = ""
    digest = hashlib.sha256(candidate.path.read_bytes())
    for part in (torch_version, sys.executable, env.get("TORCH_CUDA_ARCH_LIST", ""), env.get("CUDA_HOME", ""),
                 env.get("KERNELPILOT_REAL_CXX") or env.get("CXX", "")):
        digest.update(b"\0" + part.encode())
    return Path(platformdirs.user_cache_dir("kernelpilot")) / "builds" / f"inline-{digest.hexdigest()[:20]}"


def inline_record(directory: Path) -> BuildReport | None:
    """The report of the finished build in ``directory`` (a single-file candidate built before), or None."""
    try:
        data = json.loads((directory / INLINE_RECORD).read_text())
    except (OSError, ValueError):
        return None
    report = from_plain(BuildReport, data)
    if not report.ok or not any(directory.glob("*/*.so")):
        return None
    report.seconds, report.rebuilt, report.cache = 0.0, [], "hit"
    report.pch = ""
    return report


def write_inline_record(directory: Path, report: BuildReport) -> None:
    try:
        (directory / INLINE_RECORD).write_text(json.dumps(asdict(report)))
    except OSError:
        pass


def inline_names(path: Path) -> list[str]:
    """The literal name of each ``load_inline`` / ``cpp_extension.load`` call in a candidate file, given as
    ``name=`` or as the first argument (read, not run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    names = []
    for node, _builder in compile_calls(tree):
        given = [kw.value for kw in node.keywords if kw.arg == "name"] + node.args[:1]  # name= or the first argument
        for value in given:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names.append(value.value)
                break
    return names


# (extension name, library file) -> the module this process imported from that file
_LOADED: dict[tuple[str, str], Any] = {}


def install_import_once() -> None:
    """Make torch's extension import load each library at most once in this process (the worker calls it
    at start, before any candidate code and before the harness's integrity baseline is taken).

    Importing a pybind11 library a second time (the same candidate evaluated again in a warm worker)
    crashes the process: the second import gets the cached module and CPython initialises it again.
    Here, a library already imported is handed back as it is. A library new to this process whose name
    an earlier one used (KernelBench samples of one problem share a ``load_inline`` name) is imported
    after pybind11's table forgets that name, so it initialises its own functions.
    """
    import torch.utils.cpp_extension as cpp

    original = cpp._import_module_from_library
    if getattr(original, "kernelpilot_import_once", False):
        return

    def import_once(module_name: str, path: str, is_python_module: bool) -> Any:
        if not is_python_module:
            return original(module_name, path, is_python_module)
        library = os.path.realpath(os.path.join(path, f"{module_name}{cpp.LIB_EXT}"))
        if (module_name, library) not in _LOADED:
            from kernelpilot.extension_reload import forget_pybind11_module

            forget_pybind11_module(module_name)
            _LOADED[(module_name, library)] = original(module_name, path, is_python_module)
        return _LOADED[(module_name, library)]

    import_once.kernelpilot_import_once = True  # type: ignore[attr-defined]
    cpp._import_module_from_library = import_once


def before_import(path: Path) -> None:
    """Before a single-file candidate is imported: drop torch's version-table entries of its
    ``load_inline`` names, so torch loads its build under the plain name from its own directory (keyed
    on its bytes) instead of renaming it (name_v1) and rebuilding it inside the import. From here on, what the
    candidate makes in temporary folders is watched (``watch_candidate_files``)."""
    watch_candidate_files()
    names = inline_names(path)
    if not names:
        return
    import torch.utils.cpp_extension as cpp

    for name in names:
        cpp.JIT_EXTENSION_VERSIONER.entries.pop(name, None)


class WorkerNames:
    """Engine side: the library each ``load_inline`` name came from in the running worker process.

    pybind11 keeps one module per name in a process, and a second library under a name already used
    is not safe to load beside the first (a crash in the garbage collector was seen on 2026-12-01): a
    single-file candidate whose name the worker loaded from another library gets a fresh worker.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.libraries: dict[str, str] = {}

    def _for(self, pid: int | None) -> dict[str, str]:
        if pid != self.pid:
            self.pid, self.libraries = pid, {}
        return self.libraries

    def conflict(self, pid: int | None, names: list[str], library_dir: str) -> bool:
        loaded = self._for(pid)
        return any(loaded.get(name, library_dir) != library_dir for name in names)

    def record(self, pid: int | None, names: list[str], library_dir: str) -> None:
        self._for(pid).update({name: library_dir for name in names})


# where a candidate's run-time files usually go: sources written there get a new path in every process
_TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")
_COPY_LIMIT = (64, 8 << 20)  # at most this many files and bytes copied from a source's folder
# what the candidate's code made in this process: the folders it asked tempfile for, and since when it runs
_CREATED: set[str] = set()
_WATCH: dict[str, float] = {}


def watch_candidate_files() -> None:
    """Before a candidate's code runs in this process (the build step's script, the worker's import): remember
    the folders it makes with ``tempfile`` (``mkdtemp``, ``TemporaryDirectory``) and when it started, so that
    ``stable_load_args`` tells its run-time paths from the user's own folders, wherever those lie."""
    _WATCH["since"] = time.time()
    if getattr(tempfile.mkdtemp, "kernelpilot_watch", False):
        return
    original = tempfile.mkdtemp

    def mkdtemp(*args: Any, **kwargs: Any) -> Any:
        made = original(*args, **kwargs)
        _CREATED.add(os.path.realpath(os.fsdecode(made)))
        return made

    mkdtemp.kernelpilot_watch = True  # type: ignore[attr-defined]
    tempfile.mkdtemp = mkdtemp  # type: ignore[assignment]


def _temporary(path: str) -> bool:
    """A path the candidate made at run time, which is new in every process: inside a folder it asked tempfile
    for, or a file it wrote into a temporary folder since it started. Told apart by what the candidate made,
    not by where it lies: a user's own folder under /tmp (a checkout there included) is left as it is, and so
    is a file shipped beside the candidate."""
    real = os.path.realpath(path)
    own = os.environ.get("KERNELPILOT_CANDIDATE_DIR")
    if own and os.path.dirname(real) == os.path.realpath(own):
        return False
    if any(real == c or real.startswith(c + os.sep) for c in _CREATED):
        return True
    since = _WATCH.get("since")
    if since is None or not os.path.isfile(real):
        return False
    roots = {os.path.realpath(r) for r in (*_TEMP_ROOTS, tempfile.gettempdir())}
    in_temp = any(real.startswith(r + os.sep) for r in roots)
    return in_temp and os.stat(real).st_mtime >= since - 1.0  # written by the candidate (the second: mtime's grain)


def _stable_folder(folder: str, root: Path) -> str | None:
    """A copy of ``folder``'s files under ``root``, named by their names and bytes (the same in every process);
    None when the folder is too large to copy."""
    try:
        files = sorted((e for e in os.scandir(folder) if e.is_file()), key=lambda e: e.name)
    except OSError:
        return None
    if len(files) > _COPY_LIMIT[0] or sum(e.stat().st_size for e in files) > _COPY_LIMIT[1]:
        return None
    digest = hashlib.sha256()
    contents = {}
    for e in files:
        with open(e.path, "rb") as f:
            contents[e.name] = f.read()
        digest.update(e.name.encode() + b"\0" + hashlib.sha256(contents[e.name]).digest())
    target = root / "kp-sources" / digest.hexdigest()[:20]
    if not target.is_dir():
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        partial.mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            (partial / name).write_bytes(data)
        try:
            os.replace(partial, target)
        except OSError:  # another process made it first: the same bytes
            import shutil

            shutil.rmtree(partial, ignore_errors=True)
    return str(target)


def stable_load_args(kind: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments of a ``load`` / ``load_inline`` call with temporary paths made stable, so that the build
    step and the worker run the same build (ninja reruns a command whose line changed: a source written to a
    new ``mkdtemp()`` folder in each process would be compiled again in the worker, tens of seconds of the
    GPU slot's time). Sources in a temporary folder are read from a copy of that folder named by its files'
    bytes (sibling headers included), and a ``build_directory`` in a temporary folder or given as a relative
    path becomes one under ``TORCH_EXTENSIONS_DIR`` named by the extension. The program built is the same. Without
    ``TORCH_EXTENSIONS_DIR`` (not a kernelpilot build), the call is left as it is."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        return args, kwargs
    try:
        return _stable(kind, args, kwargs, root)
    except Exception:  # noqa: BLE001 - never the reason a candidate's build fails: the call as it was
        return args, kwargs


def _stable(kind: str, args: tuple, kwargs: dict, root: str) -> tuple[tuple, dict]:
    args, kwargs = list(args), dict(kwargs)  # type: ignore[assignment]
    name = kwargs.get("name") or (args[0] if args and isinstance(args[0], str) else "extension")
    if kind == "load":
        in_args = len(args) > 1 and "sources" not in kwargs
        sources = args[1] if in_args else kwargs.get("sources")
        if isinstance(sources, (str, os.PathLike)):
            sources = [sources]
        if isinstance(sources, (list, tuple)):
            moved = []
            for s in sources:
                path = os.path.abspath(os.fspath(s))
                folder = _stable_folder(os.path.dirname(path), Path(root)) if _temporary(path) else None
                moved.append(os.path.join(folder, os.path.basename(path)) if folder else s)
            if in_args:
                args[1] = moved
            else:
                kwargs["sources"] = moved
    build = kwargs.get("build_directory")
    # a temporary build directory, or a relative one (resolved against the build step's folder, the
    # candidate's own, and the worker's, which differ: each would build, and into the user's folder)
    if isinstance(build, (str, os.PathLike)) and (_temporary(os.fspath(build)) or not os.path.isabs(os.fspath(build))):
        stable = Path(root) / "kp-build" / str(name)
        stable.mkdir(parents=True, exist_ok=True)
        kwargs["build_directory"] = str(stable)
    return tuple(args), kwargs


# ---- compiles that failed in the build step ---------------------------------------------------------
# A candidate whose extension does not compile (its CUDA has an error) fails the same way wherever it compiles:
# when the build step saw it fail (in ModelNew.__init__ or a first forward, which the build step reaches on
# the meta device), the worker raises the same error at once instead of spending the GPU slot's time on the
# compiler again. The key is the call's arguments as made stable (sources by their bytes), without `verbose`.


def failure_key(kind: str, args: tuple, kwargs: dict) -> str:
    digest = hashlib.sha256(kind.encode())
    for value in (*args, *[(k, v) for k, v in sorted(kwargs.items()) if k != "verbose"]):
        digest.update(b"\0" + _fingerprint(value).encode())
    return digest.hexdigest()[:24]


def _fingerprint(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_fingerprint(v) for v in value) + "]"
    if isinstance(value, os.PathLike) or (isinstance(value, str) and os.path.isfile(value)):
        try:
            with open(os.fspath(value), "rb") as f:
                return os.fspath(value) + "#" + hashlib.sha256(f.read()).hexdigest()
        except OSError:
            pass
    return repr(value)


def _failures_dir() -> Path | None:
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(root) / "kp-failed" if root else None


_COMPILER_ERROR = re.compile(r"(^|\s)(error( #\d+-D)?:|error: )", re.M)
_NOT_THE_SOURCE = re.compile(r"Killed|signal \d+|out of memory|Cannot allocate|No space left|Resource temporarily"
                             r"|Permission denied|Read-only file system|cannot find -l", re.I)


def compiler_errors(output: str) -> str:
    """The compiler's error lines in a failed build's output (at most 20), when the failure is the sources'
    (an ``error:`` diagnostic); "" when it looks like the machine's (killed, out of memory or disk, a
    permission) or shows no diagnostic: such a failure is not remembered, the worker compiles again."""
    if not output or _NOT_THE_SOURCE.search(output):
        return ""
    lines = [line.strip() for line in output.splitlines() if _COMPILER_ERROR.search(line)]
    return "\n".join(lines[:20])


def record_failure(key: str, message: str) -> None:
    folder = _failures_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}.txt").write_text(message)
    except OSError:
        pass


def recorded_failure(key: str) -> str | None:
    folder = _failures_dir()
    try:
        return (folder / f"{key}.txt").read_text() if folder is not None else None
    except OSError:
        return None
