"""``kernelpilot doctor``: what a verdict needs on this machine, checked in order, with a fix for each failure.

The toolchain first (GPU and driver, torch's CUDA against the toolkit's nvcc, the host compiler, the linker
and the optional nvcc flags as the build probes them, the headers a build reads, ninja, Triton, the
profilers, writable caches), then one verdict each for a tiny native candidate and a tiny Triton candidate
(test mode with a GPU, build-only without). Exit status 1 when an essential check fails; without a GPU the
machine is fine for build-only verdicts when every essential check passes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.build.device_only import DEVICE_ONLY
from kernelpilot.machine import gpu_count
from kernelpilot.toolchain_probe import choices, compiler, nvcc_path
from kernelpilot.toolkit import detect_arch, find_cuda_home, toolchain_env

DATA = Path(__file__).resolve().parent / "data" / "doctor"
OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"


@dataclass
class Check:
    name: str
    status: str  # OK | WARN | FAIL | SKIP
    detail: str
    fix: str = ""
    essential: bool = True
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAIL and self.essential


def _version_of(text: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_gpu() -> Check:
    count = gpu_count()
    if count == 0:
        return Check("GPU", WARN, "no NVIDIA GPU visible: verdicts are build-only (compile, registers, spills)",
                     "run on a machine with an NVIDIA GPU and driver for tests and benchmarks", essential=False)
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            name = pynvml.nvmlDeviceGetName(handle)
            driver = pynvml.nvmlSystemGetDriverVersion()
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML without a usable driver
        return Check("GPU", FAIL, f"{count} GPU(s) listed but NVML failed: {exc}", "reinstall the NVIDIA driver")
    name = name.decode() if isinstance(name, bytes) else name
    driver = driver.decode() if isinstance(driver, bytes) else driver
    return Check("GPU", OK, f"{count} x {name}, driver {driver} (CUDA {cuda // 1000}.{cuda % 1000 // 10})")


def driver_cuda() -> tuple[int, int] | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver
        return None
    return cuda // 1000, cuda % 1000 // 10


def check_toolkit(env: dict[str, str]) -> Check:
    try:
        home = find_cuda_home(env)
    except KernelpilotError as exc:
        return Check("CUDA toolkit", FAIL, str(exc), "install the CUDA toolkit (nvcc) or set CUDA_HOME")
    out = subprocess.run([str(home / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=30)
    nvcc = _version_of(re.search(r"release ([\d.]+)", out.stdout).group(1)) if "release" in out.stdout else None
    try:
        torch_cuda = _version_of(_torch_cuda())
    except Exception as exc:  # noqa: BLE001 - torch missing or broken
        return Check("CUDA toolkit", FAIL, f"nvcc at {home}, but torch does not import: {exc}", "pip install torch")
    detail = f"nvcc {nvcc[0]}.{nvcc[1] if nvcc else '?'} at {home}; torch built for CUDA " \
             f"{'.'.join(map(str, torch_cuda)) if torch_cuda else 'none (CPU build)'}" if nvcc else f"nvcc at {home}"
    if nvcc is None:
        return Check("CUDA toolkit", FAIL, f"{home}/bin/nvcc --version printed no release", "reinstall the toolkit")
    if torch_cuda is not None and torch_cuda[0] != nvcc[0]:
        return Check("CUDA toolkit", FAIL, detail, f"install CUDA {torch_cuda[0]}.x's toolkit, or the torch build for "
                     f"CUDA {nvcc[0]} (extensions built by one major version do not load in the other)")
    driver = driver_cuda()
    if driver is not None and driver < nvcc:
        return Check("CUDA toolkit", FAIL, f"{detail}; the driver supports CUDA {driver[0]}.{driver[1]} only",
                     f"update the NVIDIA driver to one for CUDA {nvcc[0]}.{nvcc[1]}, or use an older toolkit")
    return Check("CUDA toolkit", OK, detail)


def _torch_cuda() -> str:
    import torch  # the one heavy import of the command: it says which CUDA torch was built for

    return str(torch.version.cuda or "")


def check_compiler(env: dict[str, str]) -> Check:
    cxx = compiler(env)
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return Check("host compiler", FAIL, f"{cxx} not found", "install g++ (or set CXX)")
    return Check("host compiler", OK if out.returncode == 0 else FAIL,
                 out.stdout.splitlines()[0] if out.stdout else cxx,
                 "" if out.returncode == 0 else f"{cxx} --version failed: reinstall it")


def check_linker(env: dict[str, str], refresh: bool) -> list[Check]:
    answer = choices(env, refresh=refresh)
    probes = "; ".join(f"{p.name} {'links' if p.ok else 'fails: ' + p.error[:120]}"
                       + (f" ({p.seconds:.2f} s)" if p.ok else "") for p in answer.probes)
    chosen = next((p for p in answer.probes if p.name == answer.linker), None)
    linker = Check("linker", OK if chosen is not None and chosen.ok else FAIL,
                   f"builds link with {answer.linker}: {probes}",
                   "" if chosen is not None and chosen.ok else
                   "no linker could link a tiny extension against torch: check that g++ and its libstdc++ are "
                   "installed")
    refused = "; ".join(f"{flag}: {why[:100]}" for flag, why in answer.nvcc_refused.items())
    flags = Check("nvcc options", OK if not refused else WARN,
                  f"used: {' '.join(answer.nvcc_flags) or 'none'}" + (f"; refused: {refused}" if refused else ""),
                  "" if not refused else "an older nvcc: builds go without these options", essential=False)
    return [linker, flags]


def check_headers(env: dict[str, str]) -> Check:
    """The CUDA headers a build reads are the toolkit's own (CPATH and friends can put others first)."""
    nvcc = nvcc_path(env)
    if nvcc is None:
        return Check("headers", FAIL, "no nvcc", "install the CUDA toolkit")
    home = find_cuda_home(env).resolve()
    with tempfile.TemporaryDirectory(prefix="kp-doctor-") as tmp:
        source = Path(tmp) / "probe.cu"
        source.write_text("#include <cuda_runtime.h>\n#include <cuda_bf16.h>\n__global__ void k() {}\n")
        out = subprocess.run([nvcc, "-M", str(source)], env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return Check("headers", FAIL, (out.stderr or out.stdout).strip()[-200:], "fix the toolkit's include folder")
    read = {Path(m).name: Path(m) for m in re.findall(r"(/\S+\.h(?:pp)?)", out.stdout)}
    foreign = [str(read[h]) for h in ("cuda_runtime.h", "cuda_runtime_api.h", "cuda_bf16.h")
               if h in read and not read[h].resolve().is_relative_to(home)]
    if foreign:
        return Check("headers", FAIL, f"a build would read {', '.join(foreign)} instead of {home}'s",
                     "unset CPATH / CPLUS_INCLUDE_PATH entries that hold CUDA headers")
    return Check("headers", OK, f"cuda_runtime.h and cuda_bf16.h from {home}")


def check_tool(name: str, needed_for: str, *, essential: bool, env: dict[str, str]) -> Check:
    where = shutil.which(name, path=env.get("PATH")) or shutil.which(name, path=str(Path(sys.executable).parent))
    if where is None and name != "ninja":
        try:
            candidate = find_cuda_home(env) / "bin" / name
            where = str(candidate) if candidate.is_file() else None
        except KernelpilotError:
            where = None
    if where is None:
        fix = "pip install ninja" if name == "ninja" else f"install it (part of the CUDA toolkit) for {needed_for}"
        return Check(name, FAIL if essential else WARN, f"not found ({needed_for})", fix, essential=essential)
    return Check(name, OK, where, essential=essential)


def check_triton() -> Check:
    if importlib.util.find_spec("triton") is None:
        return Check("Triton", WARN, "not installed: Triton candidates cannot be built", "pip install triton",
                     essential=False)
    try:
        return Check("Triton", OK, f"triton {version('triton')}")
    except PackageNotFoundError:
        return Check("Triton", OK, "triton (version unknown)")


def check_caches() -> Check:
    import platformdirs

    places = [Path(platformdirs.user_cache_dir("kernelpilot")),
              Path(os.environ.get("KERNELPILOT_DATA_DIR") or platformdirs.user_data_dir("kernelpilot"))]
    for place in places:
        try:
            place.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=place):
                pass
        except OSError as exc:
            return Check("caches", FAIL, f"{place} is not writable: {exc.strerror}",
                         "make it writable, or point XDG_CACHE_HOME / KERNELPILOT_DATA_DIR elsewhere")
    return Check("caches", OK, ", ".join(str(p) for p in places))


def check_bytecode() -> Check:
    """Whether every process that imports torch compiles its Python from source (no bytecode installed, none may be
    written), and if so kernelpilot's own cache of it (evaluation/sandbox/bytecode.py), written here when missing."""
    from kernelpilot.evaluation.sandbox import bytecode

    if not bytecode.needed():
        return Check("bytecode", OK, "torch's bytecode is installed, or Python may write it", essential=False)
    where, why = bytecode.folder(), "torch has no bytecode here and may not write any"
    if bytecode.ready():
        return Check("bytecode", OK, f"{why}; kernelpilot's own cache is read: {where}", essential=False)
    try:
        seconds = bytecode.write()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return Check("bytecode", WARN, f"{why}: each worker compiles torch's Python (5-8 s); kernelpilot's cache was "
                     f"not written: {exc}"[:300], "unset PYTHONDONTWRITEBYTECODE, or run `python -m compileall -q` on "
                     "torch's folder as the installation's owner", essential=False)
    return Check("bytecode", OK, f"{why}; kernelpilot's own cache written now ({seconds} s): {where}", essential=False)


def _verdict_check(name: str, evaluate: Callable[[], Any], mode: str, essential: bool = True,
                   want: str = "ok", also: Callable[[Any], str] | None = None) -> Check:
    """One verdict as a check: ``want`` is the status that passes; ``also`` says what else is wrong ('' when
    nothing)."""
    start = time.monotonic()
    try:
        verdict = evaluate()
    except KernelpilotError as exc:
        return Check(name, FAIL, str(exc)[:300], "see the message", essential, time.monotonic() - start)
    seconds = time.monotonic() - start
    shown = "built" if mode == "build" and verdict.status == "ok" else verdict.status
    problem = "" if verdict.status == want else f"{shown}: {(verdict.error or verdict.summary)[:300]}"
    problem = problem or (also(verdict) if also is not None else "")
    if problem:
        return Check(name, FAIL, problem, "fix the failure above (a build error names the step that failed)",
                     essential, seconds)
    return Check(name, OK, f"{shown} in {seconds:.1f} s ({mode} mode)", "", essential, seconds)


def _device_only(verdict: Any) -> str:
    command = verdict.build.command if verdict.build is not None else ""
    notes = [d.message for d in (verdict.build.diagnostics if verdict.build else [])
             if d.message.startswith("full build")]
    return ("" if command.startswith(DEVICE_ONLY)
            else f"the edit took a full build ({'; '.join(notes) or command[:120]})")


def check_candidates(gpu: bool, with_triton: bool) -> list[Check]:
    """Verdicts of the tiny candidates (test mode with a GPU, build-only without): the native one built in full,
    then a kernel edit of it built as device code alone and, with a GPU, an edit that breaks its result (must
    be incorrect: the edited kernel is the one that runs); the Triton one."""
    import platformdirs

    from kernelpilot.evaluation import EvalSettings, Evaluator

    mode = "test" if gpu else "build"
    problem = DATA / "problem.py"
    native = Path(platformdirs.user_cache_dir("kernelpilot")) / "doctor" / "native"  # a copy: edited below
    native.mkdir(parents=True, exist_ok=True)
    for source in (DATA / "native").iterdir():  # only what differs is written: a second run rebuilds nothing
        if source.is_file() and (not (native / source.name).is_file()
                                 or (native / source.name).read_bytes() != source.read_bytes()):
            shutil.copy2(source, native / source.name)
    kernel = native / "affine.cu"
    text = kernel.read_text()
    out = []
    with Evaluator(EvalSettings(), keep_warm=True) as evaluator:
        out.append(_verdict_check("native candidate", lambda: evaluator.evaluate(problem, native, mode), mode))
        if out[-1].status == OK:
            kernel.write_text(text.replace("fmaf(2.f, x[i], 1.f)", "fmaf(x[i], 2.f, 1.f)") + f"// {time.time()}\n")
            out.append(_verdict_check("kernel edit", lambda: evaluator.evaluate(problem, native, mode), mode,
                                      also=_device_only))
            if gpu and out[-1].status == OK:
                kernel.write_text(text.replace("fmaf(2.f, x[i], 1.f)", "fmaf(3.f, x[i], 1.f)"))
                out.append(_verdict_check("edit that breaks it", lambda: evaluator.evaluate(problem, native, mode),
                                          mode, want="incorrect"))
        kernel.write_text(text)
        if with_triton:
            out.append(_verdict_check("Triton candidate", lambda: evaluator.evaluate(
                problem, DATA / "triton" / "model_new.py", mode), mode))
    for check in out:
        if check.name != "native candidate" and check.status == FAIL and check.name != "Triton candidate":
            check.fix = ("a kernel edit must build as device code alone and run: report this with "
                         "`kernelpilot doctor --json`; KERNELPILOT_DEVICE_PARTS=1 or a full build still work")
    return out


def run_checks(refresh: bool = False, candidates: bool = True) -> list[Check]:
    arch = detect_arch()
    env = dict(os.environ)
    try:
        env.update(toolchain_env(arch, env))
    except KernelpilotError:
        pass
    gpu = check_gpu()
    checks = [gpu]
    steps: list[tuple[str, Callable[[], Check | list[Check]]]] = [
        ("CUDA toolkit", lambda: check_toolkit(env)), ("host compiler", lambda: check_compiler(env)),
        ("linker", lambda: check_linker(env, refresh)), ("headers", lambda: check_headers(env)),
        ("ninja", lambda: check_tool("ninja", "every build", essential=True, env=env)), ("Triton", check_triton),
        ("ncu", lambda: check_tool("ncu", "kernelpilot profile", essential=False, env=env)),
        ("compute-sanitizer", lambda: check_tool("compute-sanitizer", "memory checks", essential=False, env=env)),
        ("caches", check_caches), ("bytecode", check_bytecode)]
    for name, step in steps:
        start = time.monotonic()
        try:
            result = step()
        except Exception as exc:  # noqa: BLE001 - a check that cannot run fails, with what happened
            result = Check(name, FAIL, f"{type(exc).__name__}: {exc}"[:300], "see the error: reinstall kernelpilot's "
                           "dependencies (pip install -e .) if a module is missing")
        for check in result if isinstance(result, list) else [result]:
            check.seconds = check.seconds or round(time.monotonic() - start, 3)
            checks.append(check)
    if candidates and not any(c.failed for c in checks):
        with_triton = any(c.name == "Triton" and c.status == OK for c in checks)
        checks += check_candidates(gpu.status == OK, with_triton)
    elif candidates:
        checks.append(Check("candidates", SKIP, "not built: an essential check above failed", essential=False))
    return checks


def render(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = [f"{'check':<{width}}  status  detail"]
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status:<6}  {c.detail}")
    fixes = [c for c in checks if c.fix and c.status in (FAIL, WARN)]
    if fixes:
        lines.append("")
        lines += [f"{c.name}: {c.fix}" for c in fixes]
    failed = [c.name for c in checks if c.failed]
    lines.append("")
    if failed:
        lines.append(f"not ready: {', '.join(failed)} failed")
    elif any(c.name == "GPU" and c.status != OK for c in checks):
        lines.append("ready for build-only verdicts (no GPU)")
    else:
        lines.append("ready")
    return "\n".join(lines)


def doctor_command(args: argparse.Namespace) -> int:
    checks = run_checks(refresh=bool(getattr(args, "refresh", False)),
                        candidates=not getattr(args, "no_candidates", False))
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps({"ready": not any(c.failed for c in checks),
                                     "checks": [asdict(c) for c in checks]}, indent=1) + "\n")
    else:
        print(render(checks))
    return 1 if any(c.failed for c in checks) else 0
