"""Build a candidate in a subprocess and report what happened: diagnostics, rebuilt sources, ptxas figures.

The build runs in its own session (process group) and is killed, compilers included, at the timeout.
The caller never imports the candidate's extension. A directory candidate is built with
``python -m kernelpilot.extension --build DIR`` (torch writes build.ninja, ninja builds, the library is
test-loaded); once torch has written build.ninja for the same sources and flags, later builds run
``ninja`` alone (no Python, no torch import: an edit costs about the nvcc time of the edited file).
A single-file candidate is built by importing it (its
``load_inline`` compiles at import) with TORCH_EXTENSIONS_DIR pointed at a stable directory, which
runs the candidate's module code, so the subprocess gets a scrubbed environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from kernelpilot.evaluation.build import diagnostics as diag
from kernelpilot.evaluation.build import pch
from kernelpilot.evaluation.build.builder_notes import builder_notes
from kernelpilot.evaluation.build.cute_build import build_cute
from kernelpilot.evaluation.build.device_only import (
    after_full_build,
    sources_before_full_build,
    device_only_build,
    directory_spec,
)
from kernelpilot.evaluation.build.load_inline import (
    default_single_file_dir,
    inline_record,
    write_inline_record,
)
from kernelpilot.evaluation.build.processes import (
    release_lock,
    run_in_session,
    scratch_dir,
    superseded_report,
)
from kernelpilot.evaluation.build.single_file import SINGLE_FILE_BUILDER
from kernelpilot.evaluation.build.standby import Standby
from kernelpilot.evaluation.build.triton_ahead import build_triton
from kernelpilot.evaluation.candidate import Candidate
from kernelpilot.evaluation.sandbox import bytecode
from kernelpilot.evaluation.sandbox.build_step import caches_of, confine_build
from kernelpilot.evaluation.sandbox.confine import scrubbed_env
from kernelpilot.evaluation.supersede import CancelToken
from kernelpilot.extension import (
    BUILD_RESULT_MARKER,
    ExtensionSpec,
    default_build_dir,
    ninja_is_current,
)
from kernelpilot.native.device_build import DevicePlan
from kernelpilot.native.replace import ENV as DEVICE_BUILDS_ENV
from kernelpilot.toolkit import detect_arch, normalize_arch, toolchain_env
from kernelpilot.verdict import BuildReport, Diagnostic, KernelResources

RESOURCES_FILE = "kernelpilot-resources.json"
# Variables a build may see when kernelpilot.evaluation.sandbox.confine is not available.


def candidate_build_dir(candidate: Candidate, env: Mapping[str, str] | None = None) -> Path:
    if candidate.kind == "directory":
        return default_build_dir(candidate.path)
    if candidate.kind == "single_file":
        return default_single_file_dir(candidate, env)
    import platformdirs  # a Triton candidate: its compile record, stable per location

    digest = hashlib.sha256(str(candidate.path.resolve()).encode()).hexdigest()[:10]
    return Path(platformdirs.user_cache_dir("kernelpilot")) / "builds" / f"{candidate.path.stem}-{digest}"


def build_env(
    candidate: Candidate,
    *,
    build_dir: Path | None = None,
    arch: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a build (and a worker that later imports the candidate) runs in.

    Scrubbed of secrets, with the real CUDA toolkit first on PATH, the build directory fixed
    (KERNELPILOT_BUILD_DIR for a directory candidate, TORCH_EXTENSIONS_DIR for a single file) and
    kernelpilot importable. ``env`` adds variables; ``arch`` fixes KERNELPILOT_ARCH (else the
    candidate's ``load_extension`` options and the visible GPU decide, as they will in the worker).
    """
    base = _scrubbed_env()
    base.update(env or {})
    base.update(bytecode.env_for(base))  # the build's process imports torch (Triton, load_inline): read-only cache
    if arch:
        base["KERNELPILOT_ARCH"] = normalize_arch(arch)
    target = normalize_arch(base["KERNELPILOT_ARCH"]) if base.get("KERNELPILOT_ARCH") else detect_arch(base)
    base.update(toolchain_env(target, base))
    base.update(pch.compiler_env(base))
    variable = "KERNELPILOT_BUILD_DIR" if candidate.kind == "directory" else "TORCH_EXTENSIONS_DIR"
    base[variable] = str(resolve_build_dir(candidate, build_dir, base))
    base["KERNELPILOT_CANDIDATE_DIR"] = str(Path(candidate.root).resolve())  # its own files: stable paths
    if candidate.kind == "directory":
        base[DEVICE_BUILDS_ENV] = "1"  # the worker loads a kernel edit's cubins into the last full build
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]
    base["PYTHONPATH"] = os.pathsep.join([package_root, *[p for p in paths if p != package_root]])
    base.setdefault("PYTHONUNBUFFERED", "1")
    return base


def resolve_build_dir(candidate: Candidate, build_dir: Path | None, env: Mapping[str, str]) -> Path:
    """``build_dir``, else the caller's KERNELPILOT_BUILD_DIR / TORCH_EXTENSIONS_DIR, else the stable default."""
    if build_dir:
        return Path(build_dir)
    variable = "KERNELPILOT_BUILD_DIR" if candidate.kind == "directory" else "TORCH_EXTENSIONS_DIR"
    if env.get(variable):
        return Path(env[variable]).expanduser()
    return candidate_build_dir(candidate, env)


def standby_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a waiting builder process starts in (each build then brings its own)."""
    base = _scrubbed_env()
    base.update(env or {})
    base.update(bytecode.env_for(base))
    package_root = str(Path(__file__).resolve().parents[2])
    base["PYTHONPATH"] = os.pathsep.join([package_root,
                                          *[p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return base


def _scrubbed_env() -> dict[str, str]:
    return dict(scrubbed_env())  # the confinement's policy: what a build may see of this environment


def build_candidate(
    candidate: Candidate, *, build_dir: Path | None = None, arch: str | None = None, timeout_s: float = 300,
    env: Mapping[str, str] | None = None, problem: Path | None = None, standby: Standby | None = None,
    cancel: CancelToken | None = None, confine: bool = False, device_only: bool = True,
    on_device_plan: Callable[[DevicePlan], None] | None = None,
) -> BuildReport:
    """Build ``candidate`` in a killable subprocess; never raises for a failed build, only reports it.

    ``problem``: the problem file, for Triton candidates (their kernels' signatures come from its inputs).
    ``standby``: a builder process already waiting (builder.py), used instead of starting one.
    ``cancel``: a newer save's cancel kills the build's process group (supersede.py); the report then
    says ``superseded`` (not ok, and no error of the candidate's).
    ``device_only``: a directory candidate's kernel edit may be built as device code alone (device_step.py);
    False always builds it in full. ``on_device_plan`` sees a device-only build's plan before it compiles.
    """
    run_env = build_env(candidate, build_dir=build_dir, arch=arch, env=env)
    directory = Path(run_env["KERNELPILOT_BUILD_DIR" if candidate.kind == "directory" else "TORCH_EXTENSIONS_DIR"])
    if candidate.kind == "single_file" and (cached := inline_record(directory)) is not None:
        return cached
    if candidate.kind == "pytorch":  # no kernel of its own: nothing to compile (the verdict says no-kernel)
        return BuildReport(ok=True, build_dir=str(directory), command="(nothing to build: no kernel of its own)",
                           diagnostics=[Diagnostic(severity="note", tool="build", message=(
                               "no kernel of its own: no load_inline or cpp_extension.load call, no @triton.jit "
                               "function, no .cu file"))])
    if candidate.kind == "cute":  # the DSL checked; its kernels compile in the worker's warm-up (cute_build.py)
        return build_cute(candidate, env=run_env, directory=directory)
    if candidate.kind == "triton":  # its own build step: triton_ahead.py
        return build_triton(candidate, problem=problem, env=run_env, timeout_s=timeout_s, directory=directory,
                            cancel=cancel, confine=confine, standby=standby)
    full_reason = ""  # why a directory candidate's save takes the full build
    spec = directory_spec(candidate, directory, run_env) if candidate.kind == "directory" else ""
    if candidate.kind == "directory" and device_only:
        device = device_only_build(candidate, directory, run_env, spec, timeout_s=timeout_s, cancel=cancel,
                                   on_plan=on_device_plan)
        if isinstance(device, BuildReport):
            return device
        full_reason = device
    fast = _ninja_fast_path(spec, directory, run_env) if not isinstance(spec, str) else None
    argv, command = _build_argv(candidate, directory, problem, fast)
    unconfined = ""  # why the candidate's code runs unconfined here, when it does
    if confine and candidate.kind == "single_file":  # its code runs here: confined as the worker is
        reads = [candidate.root, *([Path(problem).resolve().parent] if problem else [])]
        unconfined = confine_build(run_env, directory, reads, caches_of(run_env))  # it may fill the worker's caches
    start = time.monotonic()
    waiting = None
    cwd = candidate.root if candidate.kind == "directory" else scratch_dir(directory)
    # what the full build reads, as it starts: recorded for the next save's device-only build
    before = sources_before_full_build(candidate, spec)  # None where spec is no directory candidate's
    if standby is not None and fast is None:  # torch's builder: a process that imported it already
        waiting = standby.take(candidate.kind, argv[3:], run_env, str(cwd))
    output, timed_out, returncode = run_in_session(argv, run_env, cwd=cwd, timeout_s=timeout_s, proc=waiting,
                                                   cancel=cancel)
    seconds = time.monotonic() - start
    if cancel is not None and cancel.cancelled:
        return superseded_report(directory, command, seconds)
    result = {"ok": returncode == 0, "arch": fast[1]} if fast is not None else _result_line(output)
    report = BuildReport(
        ok=False, seconds=round(seconds, 3), command=command,
        arch=result.get("arch") or run_env.get("KERNELPILOT_ARCH") or _arch_of(run_env), build_dir=str(directory),
    )
    _read_output(report, output, result, candidate, directory)
    if timed_out:
        release_lock(directory, result)
        message = f"build timed out after {timeout_s:g} s and was killed"
        report.diagnostics.append(Diagnostic(severity="error", message=message, tool="build"))
        report.timed_out = True
    else:
        report.ok = returncode == 0 and bool(result.get("ok"))
        if not report.ok and not any(d.severity == "error" for d in report.diagnostics):
            report.diagnostics.append(_result_diagnostic(result, returncode, candidate))
    report.diagnostics += builder_notes(result, report.arch, unconfined, candidate if report.ok else None)
    if candidate.kind == "single_file" and report.ok:
        write_inline_record(directory, report)
    if candidate.kind == "directory":
        after_full_build(report, candidate, directory, run_env, spec, full_reason, before, standby)
    return report


def _build_argv(candidate: Candidate, directory: Path, problem: Path | None,
                fast: tuple[list[str], str] | None) -> tuple[list[str], str]:
    """The build's process and how the report names it: ninja alone when the last build's file is current, the
    extension builder for a directory, the single-file builder script otherwise."""
    if fast is not None:
        argv = fast[0]
    elif candidate.kind == "directory":
        argv = [sys.executable, "-m", "kernelpilot.extension", "--build", str(candidate.path),
                "--build-dir", str(directory)]
    else:
        directory.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-c", SINGLE_FILE_BUILDER, str(candidate.path)]
        argv += [str(Path(problem).resolve())] if problem else []
    shown = argv if candidate.kind == "directory" else [sys.executable, "<single-file builder>", str(candidate.path)]
    return argv, shlex.join(shown)


def _read_output(report: BuildReport, output: str, result: dict, candidate: Candidate, directory: Path) -> None:
    """What the build's output says: diagnostics, the sources compiled, the PCH, kernels' resources, its tail."""
    report.pch = pch_summary(output)
    report.diagnostics = diag.parse_diagnostics(output, root=candidate.root)
    report.rebuilt = [_source_name(s, candidate) for s in diag.compiled_sources(output, root=candidate.root)]
    if candidate.kind == "single_file":
        _map_inline_locations(report.diagnostics, candidate, directory)
    report.kernels = _kernel_resources(output, directory, candidate)
    report.log_tail = diag.tail(output)


def pch_summary(output: str) -> str:
    """The compiler wrapper's precompiled-header lines (pch.py), one per C++ compile, in build order."""
    lines = [line.split(pch.MARKER, 1)[1].strip() for line in output.splitlines() if pch.MARKER in line]
    return "; ".join(dict.fromkeys(lines))


def _ninja_fast_path(spec: ExtensionSpec, directory: Path, env: Mapping[str, str]) -> tuple[list[str], str] | None:
    """``ninja -v -C DIR`` (and the arch) when torch already wrote build.ninja for exactly this candidate.

    Skips starting Python and importing torch (seconds) for the common edit: a change inside
    existing sources. The library is then not test-loaded here (device_step.after_full_build loads it when
    it needs new symbols). Any change of sources, options, arch, torch or toolkit takes the torch path.
    """
    if not ninja_is_current(spec, env):
        return None
    ninja = shutil.which("ninja", path=env.get("PATH")) or shutil.which("ninja", path=str(Path(sys.executable).parent))
    if ninja is None:
        return None
    argv = [ninja, "-v", "-C", str(directory)]
    if env.get("MAX_JOBS", "").isdigit():
        argv += ["-j", env["MAX_JOBS"]]
    return argv, spec.arch


def _arch_of(env: Mapping[str, str]) -> str:
    return normalize_arch(env["TORCH_CUDA_ARCH_LIST"]) if env.get("TORCH_CUDA_ARCH_LIST") else ""


def _result_line(output: str) -> dict:
    for line in reversed(output.splitlines()):
        if line.startswith(BUILD_RESULT_MARKER):
            try:
                return json.loads(line[len(BUILD_RESULT_MARKER):])
            except json.JSONDecodeError:
                break
    return {}


def _result_diagnostic(result: dict, returncode: int, candidate: Candidate) -> Diagnostic:
    if result.get("error"):
        message = result["error"]
        if result.get("cause") and result["cause"] not in message:
            message += f" ({result['cause'].splitlines()[0][:300]})"
        line = result.get("line")
        file = candidate.relative(candidate.model_file) if line else None
        return Diagnostic(severity="error", message=message, file=file, line=line, tool="python")
    return Diagnostic(
        severity="error", tool="build",
        message=f"the build process exited with status {returncode} without a result (see the log)",
    )


def _source_name(source: str, candidate: Candidate) -> str:
    path = Path(source)
    return source if not path.is_absolute() else path.name


def _map_inline_locations(diagnostics: list[Diagnostic], candidate: Candidate, directory: Path) -> None:
    """Point errors in load_inline's generated sources at the same line of the candidate's .py file."""
    try:
        lines = candidate.model_file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for d in diagnostics:
        if not d.file or d.line is None or not Path(d.file).is_absolute():
            continue
        try:
            generated = Path(d.file).read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        if not (0 < d.line <= len(generated)) or not generated[d.line - 1].strip():
            continue
        text = generated[d.line - 1].strip()
        hits = [i for i, line in enumerate(lines, 1) if line.strip() == text]
        if len(hits) == 1:
            d.file, d.line = candidate.relative(candidate.model_file), hits[0]


def _kernel_resources(output: str, directory: Path, candidate: Candidate) -> list[KernelResources]:
    """ptxas figures of every kernel: fresh ones for recompiled files, cached ones for the others."""
    cache_file = directory / RESOURCES_FILE
    try:
        cached: dict[str, list[dict]] = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cached = {}
    fresh: dict[str, list[KernelResources]] = {}
    for step in diag.ninja_steps(output):
        if step.source and not step.failed and "ptxas" in step.output:
            fresh[step.source] = diag.parse_kernel_resources(step.output)
    if not fresh and not cached:
        fresh = {"": diag.parse_kernel_resources(output)} if "ptxas info" in output else {}
    for source, kernels in fresh.items():
        cached[source] = [asdict(k) for k in diag.demangle_kernels(kernels)]
    current = {str(s) for s in candidate.sources} if candidate.kind == "directory" else None
    if current is not None:
        cached = {s: k for s, k in cached.items() if s in current}
    if fresh:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            cache_file.write_text(json.dumps(cached, indent=1))
        except OSError:
            pass
    return [KernelResources(**k) for source in sorted(cached) for k in cached[source]]
