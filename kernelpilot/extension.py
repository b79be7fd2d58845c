"""Build and load a directory candidate's extension: ``binding.cpp`` + every ``*.cu`` beside ``model_new.py``.

A candidate's ``model_new.py`` calls ``_ext = load_extension(__file__)``. The build uses
torch.utils.cpp_extension.load with ninja in a stable build directory per candidate lineage, so an
edit to one ``.cu`` file recompiles that file and relinks (about a second) while ``binding.cpp``, which
includes the torch headers, stays compiled.

Keyword arguments that change the build (``arch``, ``extra_cuda_cflags``, ...) must be literals in
``model_new.py``: ``python -m kernelpilot.extension --build DIR`` (the engine's build step, run in a
subprocess) reads them from the source without executing it, so both builds use the same flags.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.errors import ExtensionBuildError, KernelpilotError
from kernelpilot.extension_options import options_from_source
from kernelpilot.extension_reload import already_loaded, fresh_module
from kernelpilot.native import replace
from kernelpilot.toolchain_probe import linker_flags, nvcc_flags
from kernelpilot.toolkit import detect_arch, gencode_flags, normalize_arch, toolchain_env

BINDING_FILE = "binding.cpp"
MODEL_FILE = "model_new.py"
BUILD_RESULT_MARKER = "KERNELPILOT_BUILD_RESULT "
# -t0 (added when nvcc accepts it, toolchain_probe.OPTIONAL_NVCC_FLAGS): nvcc may use as many threads as it
# likes for its steps (its phases still run mostly one after another for one architecture). The cubin is
# byte-identical; the softmax example's .cu compiles in 2.98 s instead of 3.19 s (2-core machine, nvcc 13.0).
# -static-global-template-stub=false (likewise): the host stub of an instantiated __global__ template gets weak
# (not static) linkage, so binding.cpp can launch a kernel template instantiated in a .cu file
# (kernelpilot/launch.h). Host code only: the device code is the same. Each instance must be defined in one
# .cu file only.
BASE_CUDA_FLAGS = ("-O3", "-lineinfo", "-Xptxas=-v", "-std=c++17")
# The C++ sources are host glue (argument checks, a launch): -O1 compiles the softmax example's binding in
# 5.4 s where -O3 takes 8.8 s (2-core machine, precompiled header loaded; -O0: 4.9 s). A candidate that
# does real host work passes extra_cflags=["-O3"] (the last -O wins). torch picks the C++ standard.
BASE_CXX_FLAGS = ("-O1",)
# kernelpilot/launch.h (a candidate's host code launches its kernels through it) and its siblings
INCLUDE_DIR = Path(__file__).resolve().parent / "include"



@dataclass
class ExtensionSpec:
    """Everything that determines one extension build."""

    directory: Path
    name: str
    sources: list[Path]
    build_dir: Path
    arch: str
    cuda_cflags: list[str] = field(default_factory=list)
    cflags: list[str] = field(default_factory=list)
    ldflags: list[str] = field(default_factory=list)

    @property
    def library(self) -> Path:
        import importlib.machinery

        suffix = ".pyd" if sys.platform == "win32" else ".so"
        assert suffix in importlib.machinery.EXTENSION_SUFFIXES
        return self.build_dir / f"{self.name}{suffix}"


TORCH_BUILD_FAILURE = "Error building extension"  # how torch.utils.cpp_extension's message of a failed compile starts


def default_name(directory: Path) -> str:
    """A module name stable for this directory: ``kp_<dirname>_<hash>``."""
    stem = re.sub(r"\W", "_", directory.name).strip("_")[:40] or "candidate"
    return f"kp_{stem}_{_dir_hash(directory)}"


def default_build_dir(directory: Path, env: Mapping[str, str] | None = None) -> Path:
    """$KERNELPILOT_BUILD_DIR, else <user cache>/kernelpilot/builds/<dirname>-<hash of the resolved dir>."""
    env = os.environ if env is None else env
    if env.get("KERNELPILOT_BUILD_DIR"):
        return Path(env["KERNELPILOT_BUILD_DIR"]).expanduser()
    import platformdirs

    cache = Path(platformdirs.user_cache_dir("kernelpilot"))
    return cache / "builds" / f"{directory.name or 'candidate'}-{_dir_hash(directory)}"


def _dir_hash(directory: Path) -> str:
    return hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:10]


def extension_sources(directory: Path) -> list[Path]:
    """``binding.cpp`` first, then every ``*.cu`` in name order; errors say what is missing."""
    binding = directory / BINDING_FILE
    kernels = sorted(p for p in directory.glob("*.cu") if p.is_file())
    if not binding.is_file():
        raise ExtensionBuildError(
            f"{directory} has no {BINDING_FILE}: add one that includes the torch headers it uses "
            "(torch/csrc/utils/pybind.h, ATen/core/Tensor.h, ...), launches the kernels of the .cu files through "
            "kernelpilot/launch.h and defines PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)."
        )
    if not kernels:
        raise ExtensionBuildError(
            f"{directory} has no .cu files: put the kernels in kernel.cu (device code only, an explicit "
            "instantiation of each instance binding.cpp launches)."
        )
    return [binding, *kernels]


def make_spec(
    directory: Path,
    *,
    name: str | None = None,
    arch: str | None = None,
    arch_specific: bool = False,
    extra_cuda_cflags: Sequence[str] = (),
    extra_cflags: Sequence[str] = (),
    extra_ldflags: Sequence[str] = (),
    build_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ExtensionSpec:
    env = os.environ if env is None else env
    directory = directory.resolve()
    if env.get("KERNELPILOT_ARCH"):
        arch = normalize_arch(env["KERNELPILOT_ARCH"])  # the engine's choice wins
    elif arch:
        arch = normalize_arch(arch)
    else:
        arch = detect_arch(env, arch_specific=arch_specific)
    if name is not None and not name.isidentifier():
        raise ExtensionBuildError(f"Extension name {name!r} is not a Python identifier: use letters, digits and _.")
    return ExtensionSpec(
        directory=directory,
        name=name or default_name(directory),
        sources=extension_sources(directory),
        build_dir=build_dir or default_build_dir(directory, env),
        arch=arch,
        cuda_cflags=[*BASE_CUDA_FLAGS, *nvcc_flags(env), *gencode_flags(arch), f"-I{INCLUDE_DIR}",
                     *extra_cuda_cflags],
        cflags=[*BASE_CXX_FLAGS, f"-I{INCLUDE_DIR}", *extra_cflags],
        ldflags=[*linker_flags(env), *extra_ldflags],
    )


def prepare_toolchain(arch: str) -> None:
    """Point this process (and torch's cached CUDA_HOME) at the real toolkit before building."""
    additions = toolchain_env(arch)
    os.environ.update(additions)
    module = sys.modules.get("torch.utils.cpp_extension")
    if module is not None and getattr(module, "CUDA_HOME", None) != additions["CUDA_HOME"]:
        module.CUDA_HOME = additions["CUDA_HOME"]  # type: ignore[attr-defined]


def build(spec: ExtensionSpec, *, verbose: bool = False, load_module: bool = True) -> ModuleType | None:
    """Compile ``spec`` with ninja and return the imported module (or only dlopen it to check symbols).

    In kernelpilot's worker (device-only builds on), a kernel edit's cubins, compiled by the engine's build
    step, are loaded into the last full build instead, and the last full build is imported as it is while the
    files are those it read (kernelpilot/native/replace.py)."""
    if load_module and replace.enabled():
        module = replace.device_module(spec.name, spec.build_dir)
        if module is None and ninja_is_current(spec, os.environ):  # this spec's flags, sources and toolchain
            module = replace.full_module(spec.name, spec.build_dir, spec.library)
        if module is not None:
            return module
    prepare_toolchain(spec.arch)
    import torch.utils.cpp_extension as cpp

    if cpp.CUDA_HOME != os.environ["CUDA_HOME"]:
        cpp.CUDA_HOME = os.environ["CUDA_HOME"]
    spec.build_dir.mkdir(parents=True, exist_ok=True)
    # torch renames an extension rebuilt in the same process (name_v1, ...), which changes every
    # compile command and recompiles binding.cpp; keep the name so ninja rebuilds only what changed.
    cpp.JIT_EXTENSION_VERSIONER.entries.pop(spec.name, None)
    # Once this process has imported the extension, torch must not import it again (pybind11 would
    # hand back the first module and re-bind it to the new file): build, then _fresh_module decides.
    import_here = load_module and not already_loaded(spec.name)
    try:
        result = cpp.load(
            name=spec.name,
            sources=[str(s) for s in spec.sources],
            extra_cflags=list(spec.cflags),
            extra_cuda_cflags=list(spec.cuda_cflags),
            extra_ldflags=list(spec.ldflags),
            build_directory=str(spec.build_dir),
            verbose=verbose,
            with_cuda=True,
            is_python_module=import_here,
        )
    except (RuntimeError, OSError, ImportError) as exc:
        if isinstance(exc, RuntimeError) and str(exc).startswith(TORCH_BUILD_FAILURE):
            write_stamp(spec)  # torch wrote build.ninja for this spec; the compiler refused a source
        else:
            stamp_path(spec).unlink(missing_ok=True)
        raise ExtensionBuildError(_first_line(_chain_text(exc), spec)) from exc
    write_stamp(spec)
    if not load_module:
        return None
    module = fresh_module(spec, result if import_here else None)
    if replace.enabled():
        replace.use_cubins(module, [])  # the full build's own kernels, whatever an earlier edit loaded
    return module


def stamp_path(spec: ExtensionSpec) -> Path:
    return spec.build_dir / "kernelpilot-build.json"


def stamp_of(spec: ExtensionSpec, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What build.ninja in ``spec.build_dir`` was written for (without importing torch)."""
    from importlib.metadata import PackageNotFoundError, version

    env = os.environ if env is None else env
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = ""
    return {
        "name": spec.name,
        "sources": [str(s) for s in spec.sources],
        "cuda_cflags": spec.cuda_cflags,
        "cflags": spec.cflags,
        "ldflags": spec.ldflags,
        "torch": torch_version,
        "python": sys.executable,
        "cuda_home": env.get("CUDA_HOME", ""),
        "cxx": env.get("CXX", ""),  # the compiler wrapper (precompiled headers) or the plain compiler
    }


def write_stamp(spec: ExtensionSpec) -> None:
    try:
        stamp_path(spec).write_text(json.dumps(stamp_of(spec), indent=1))
    except OSError:
        pass


def ninja_is_current(spec: ExtensionSpec, env: Mapping[str, str]) -> bool:
    """True when build.ninja in the build directory was written by torch for exactly this spec.

    Then running ``ninja`` there rebuilds what changed without importing torch (the fast path of
    the build step). Adding or removing a source, or changing a flag, needs torch to rewrite it.
    """
    if not (spec.build_dir / "build.ninja").is_file() or not spec.library.is_file():
        return False
    try:
        recorded = json.loads(stamp_path(spec).read_text())
    except (OSError, ValueError):
        return False
    return bool(recorded == stamp_of(spec, env))


def _chain_text(exc: BaseException) -> str:
    """The messages of ``exc`` and its causes (torch wraps the loader's "undefined symbol" in its own error)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}".strip())
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _first_line(text: str, spec: ExtensionSpec) -> str:
    """One sentence: the first error the tools printed (torch puts the output in the exception)."""
    from kernelpilot.evaluation.build.diagnostics import parse_diagnostics

    text = text.strip()
    errors = [d for d in parse_diagnostics(text, root=spec.directory) if d.severity == "error"]
    if errors:
        e = errors[0]
        where = f"{e.file}:{e.line}: " if e.file and e.line else (f"{e.file}: " if e.file else "")
        reason = f"{where}{e.message}"
    else:
        reason = text.splitlines()[0] if text else "no message"
    return f"Building the extension of {spec.directory} failed ({reason[:300]}): fix it and build again."


def load_extension(
    model_file: str | os.PathLike[str],
    *,
    name: str | None = None,
    build_only: bool = False,
    verbose: bool | None = None,
    arch: str | None = None,
    arch_specific: bool = False,
    extra_cuda_cflags: Sequence[str] = (),
    extra_cflags: Sequence[str] = (),
    extra_ldflags: Sequence[str] = (),
) -> ModuleType | None:
    """Build ``binding.cpp`` + every ``*.cu`` beside ``model_file`` and return the extension module.

    ``build_only`` compiles and checks that the library loads (no undefined symbols) without
    importing it as a Python module, and returns None. ``verbose`` (default $KERNELPILOT_BUILD_VERBOSE)
    prints the ninja and ptxas output. ``arch`` / ``arch_specific`` pick the target (sm_90 / sm_90a);
    $KERNELPILOT_ARCH overrides both. Raises ExtensionBuildError or ToolchainError.
    """
    if verbose is None:
        verbose = os.environ.get("KERNELPILOT_BUILD_VERBOSE", "") not in ("", "0")
    spec = make_spec(
        Path(model_file).resolve().parent,
        name=name,
        arch=arch,
        arch_specific=arch_specific,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_cflags=extra_cflags,
        extra_ldflags=extra_ldflags,
    )
    return build(spec, verbose=verbose, load_module=not build_only)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kernelpilot.extension --build DIR``: build a directory candidate, print the result."""
    parser = argparse.ArgumentParser(prog="python -m kernelpilot.extension")
    parser.add_argument("--build", metavar="DIR", required=True, type=Path, help="candidate directory")
    parser.add_argument("--build-dir", type=Path, default=None, help="build directory (default: stable per candidate)")
    parser.add_argument("--arch", default=None, help="target architecture, e.g. sm_90 or sm_90a")
    parser.add_argument("--quiet", action="store_true", help="do not print the compiler output")
    args = parser.parse_args(argv)
    directory = args.build.resolve()
    result: dict[str, Any] = {"ok": False, "directory": str(directory)}
    try:
        options = options_from_source(directory / MODEL_FILE) if (directory / MODEL_FILE).is_file() else {}
        if args.arch:
            options["arch"] = args.arch
        spec = make_spec(directory, build_dir=args.build_dir, **options)
        result.update(name=spec.name, build_dir=str(spec.build_dir), arch=spec.arch,
                      sources=[str(s) for s in spec.sources], library=str(spec.library))
        sys.stdout.flush()
        build(spec, verbose=not args.quiet, load_module=False)
        result["ok"] = True
    except KernelpilotError as exc:
        result["error"] = str(exc)
        if exc.__cause__ is not None:
            result["cause"] = _chain_text(exc.__cause__)[:4000]
    sys.stdout.flush()
    print(BUILD_RESULT_MARKER + json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    from kernelpilot.process_exit import leave

    leave(main())  # no interpreter teardown once the result is printed (process_exit.py)
