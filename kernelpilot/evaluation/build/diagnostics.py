"""Turn raw build output (ninja, nvcc, ptxas, g++, ld, Python import errors) into structured records.

Everything here is pure text processing on what the tools print, so it is tested on recorded output.
Paths inside the candidate directory are reported relative to it (``kernel.cu``), others unchanged.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.verdict import Diagnostic, KernelResources

CUDA_HOME_HINT = (
    "the linker did not find the CUDA runtime: set CUDA_HOME to the toolkit root "
    "(the directory with bin/nvcc and lib64/libcudart.so), e.g. /usr/local/cuda"
)

# nvcc front end (EDG): /abs/kernel.cu(12): error: identifier "x" is undefined
#                       kernel.cu(5): warning #177-D: variable "x" was declared but never referenced
_NVCC_RE = re.compile(
    r"^(?P<file>[^\s(][^()]*?)\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic error|remark|note)"
    r"(?: #[\w-]+)?: (?P<msg>.*)$"
)
# the nvcc driver itself: "nvcc fatal   : Unknown option '--bogus'"
_NVCC_DRIVER_RE = re.compile(r"^nvcc (?P<sev>fatal|error|warning)\s*: (?P<msg>.*)$")
# gcc / clang / nvcc host compiler: /abs/binding.cpp:4:5: error: expected initializer before 'return'
_GCC_RE = re.compile(
    r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
# ptxas: "ptxas error   : Entry function '_Z3bigPf' uses too much shared data (...)"
#        "ptxas /tmp/x.ptx, line 12; error   : Unknown symbol 'foo'"
_PTXAS_MSG_RE = re.compile(
    r"^ptxas(?: (?P<file>\S+), line (?P<line>\d+);)? ?(?P<sev>error|fatal|warning)\s*: (?P<msg>.*)$"
)
_PTXAS_ENTRY_RE = re.compile(
    r"^ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'"
)
_PTXAS_PROPS_FOR_RE = re.compile(r"^ptxas info\s*: Function properties for (?P<name>\S+)")
_PTXAS_FRAME_RE = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
_PTXAS_USED_RE = re.compile(r"^ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)$")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CMEM_RE = re.compile(r"(\d+) bytes cmem\[\d+\]")
# linker
_LD_UNDEF_RE = re.compile(r"undefined reference to [`'‘](?P<sym>[^'’]+)['’]")
_LD_MULTI_RE = re.compile(r"multiple definition of [`'‘](?P<sym>[^'’]+)['’]")
_LD_CANNOT_FIND_RE = re.compile(r"cannot find -l(?P<lib>\S+?)(?::.*)?$")
_LD_PREFIX_RE = re.compile(r"^(?:/\S*/)?(?:ld|ld\.bfd|ld\.gold|ld\.lld|collect2|nvlink)(?:: | error )")
_LD_IN_FUNCTION_RE = re.compile(r"^(?:\S*ld(?:\.\w+)?: )?(?P<obj>[^\s:]+\.o): in function ")
_LD_OBJECT_RE = re.compile(r"(?:^|[\s;])(?:/usr/bin/ld: )?([\w.+-]+\.o)(?=:)")
_LD_LOC_RE = re.compile(r"^(?P<file>[^\s:]+\.(?:cu|cpp|cc|cxx|c|cuh|h|hpp)):(?P<line>\d+):")
# dlopen at import time: /path/x.so: undefined symbol: _Z3foov
_DLOPEN_UNDEF_RE = re.compile(r"undefined symbol: (?P<sym>[^\s\"',\\]+)")
# ninja
_NINJA_FAILED_RE = re.compile(r"^FAILED: (?:\[code=\d+\] )?(?P<target>.+)$")
_NINJA_STEP_RE = re.compile(r"^\[\d+/\d+\] (?P<cmd>.*)$")
_COMPILE_SOURCE_RE = re.compile(r"(?:^|\s)-(?:c|cubin)\s+(?P<src>\S+)")

# C++ APIs torch has removed that published generations still use: the error names the API's replacement, and
# says the file was written for an older torch (the leaderboard's and CUDA-L1's files pass Tensor::type() to
# AT_DISPATCH macros: 20 of 623; torch 2.14's headers refuse it)
_OLDER_TORCH = "written for an older torch than this one"
_REMOVED_TORCH_APIS = (
    (re.compile(r"DeprecatedTypeProperties.*\bto\b.*ScalarType"),
     "Tensor::type() passed to an AT_DISPATCH macro, which this torch no longer accepts: pass x.scalar_type()"),
    (re.compile(r"\bAT_CHECK\b.*(?:undefined|not declared)|(?:undefined|not declared).*\bAT_CHECK\b"),
     "AT_CHECK is gone from torch: use TORCH_CHECK"),
    (re.compile(r"THC/THC\w*\.h"), "torch no longer ships the THC headers: use ATen's (ATen/cuda/CUDAContext.h)"),
)


def removed_api_hint(message: str) -> str:
    """A compiler error's message with the replacement named, when it is about a C++ API torch removed."""
    for pattern, hint in _REMOVED_TORCH_APIS:
        if pattern.search(message):
            return f"{message} ({hint}; {_OLDER_TORCH})"
    return message


_SEVERITY = {
    "error": "error",
    "fatal error": "error",
    "catastrophic error": "error",
    "fatal": "error",
    "warning": "warning",
    "remark": "note",
    "note": "note",
}


def relative_to(path: str, root: Path | None) -> str:
    """``path`` relative to ``root`` when it lies inside it, else unchanged."""
    if root is None:
        return path
    try:
        p = Path(path)
        if not p.is_absolute():
            return path
        return str(p.resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return path


_GOLD_PREVIOUS_RE = re.compile(r"^(?:\S*ld\.gold: )(?P<obj>[^\s:]+\.o): previous definition here")


def _join_gold_definitions(lines: list[str]) -> list[str]:
    """GNU gold says where a symbol was first defined on the line after "multiple definition of"; BFD ld
    says it on the same line ("...; kernel.cuda.o:a.cpp:(.text+0x0): first defined here"). Fold gold's
    line into the one before it, so the same rule names both objects."""
    out: list[str] = []
    for line in lines:
        if (m := _GOLD_PREVIOUS_RE.match(line.strip())) and out and _LD_MULTI_RE.search(out[-1]):
            out[-1] = f"{out[-1]}; {m['obj']}: first defined here"
            continue
        out.append(line)
    return out


def parse_diagnostics(text: str, *, root: Path | None = None) -> list[Diagnostic]:
    """Every error/warning/note the build tools printed, in order, without duplicates."""
    out: list[Diagnostic] = []
    seen: set[tuple[str, str | None, int | None, str]] = set()
    pending_ld_location: tuple[str, int] | None = None
    pending_object: str | None = None  # from "ld: kernel.cuda.o: in function `f':"

    def add(d: Diagnostic) -> None:
        if d.severity == "error":
            d.message = removed_api_hint(d.message)
        key = (d.severity, d.file, d.line, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)

    for raw in _join_gold_definitions(text.splitlines()):
        line = raw.rstrip()
        if not line:
            continue
        if m := _NVCC_RE.match(line):
            add(Diagnostic(
                severity=_SEVERITY[m["sev"]], message=m["msg"].strip(),
                file=relative_to(m["file"], root), line=int(m["line"]), tool="nvcc",
            ))
            continue
        if m := _NVCC_DRIVER_RE.match(line):
            add(Diagnostic(severity=_SEVERITY[m["sev"]], message=m["msg"].strip(), tool="nvcc"))
            continue
        if m := _PTXAS_MSG_RE.match(line):
            add(Diagnostic(
                severity=_SEVERITY[m["sev"]], message=m["msg"].strip(),
                file=relative_to(m["file"], root) if m["file"] else None,
                line=int(m["line"]) if m["line"] else None, tool="ptxas",
            ))
            continue
        if m := _LD_IN_FUNCTION_RE.match(line):
            pending_object = m["obj"]
            continue
        if _handle_linker(line, root, add, pending_ld_location, pending_object):
            pending_ld_location = pending_object = None
            continue
        if m := _GCC_RE.match(line):
            add(Diagnostic(
                severity=_SEVERITY[m["sev"]], message=m["msg"].strip(),
                file=relative_to(m["file"], root), line=int(m["line"]),
                column=int(m["col"]) if m["col"] else None, tool="c++",
            ))
            continue
        if m := _LD_LOC_RE.match(line):  # "kernel.cu:11: multiple definition ..." handled above
            pending_ld_location = (m["file"], int(m["line"]))
            continue
        if m := _NINJA_FAILED_RE.match(line):
            target = m["target"].strip()
            add(Diagnostic(severity="error", message=f"build step failed: {target}", tool="ninja"))
            continue
        if (m := _DLOPEN_UNDEF_RE.search(line)) and ("ImportError" in line or "OSError" in line or ".so:" in line):
            sym = m["sym"]
            add(Diagnostic(
                severity="error", tool="ld",
                message=f"the built library does not load: undefined symbol {demangle([sym]).get(sym, sym)}: "
                "it is declared but defined in no source file, or a library is missing from the link",
            ))
    return _ninja_last(out)


def _ninja_last(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """ninja's "build step failed" explains nothing when a compiler said why: demote it to a note, last."""
    specific = any(d.severity == "error" and d.tool != "ninja" for d in diagnostics)
    if not specific:
        return diagnostics
    ninja = [d for d in diagnostics if d.tool == "ninja"]
    for d in ninja:
        d.severity = "note"
    return [d for d in diagnostics if d.tool != "ninja"] + ninja


def object_source(obj: str, root: Path | None) -> str:
    """``kernel.cuda.o`` -> ``kernel.cu``; ``binding.o`` -> ``binding.cpp`` when it exists in ``root``."""
    name = Path(obj).name
    if name.endswith(".cuda.o"):
        return name[: -len(".cuda.o")] + ".cu"
    if name.endswith(".o") and root is not None:
        for ext in (".cpp", ".cc", ".cxx", ".c"):
            if (root / (name[:-2] + ext)).is_file():
                return name[:-2] + ext
    return name


def _handle_linker(  # type: ignore[no-untyped-def]
    line: str, root: Path | None, add, pending: tuple[str, int] | None, pending_object: str | None
) -> bool:
    """Linker errors (ld via the host compiler, nvlink); True when ``line`` was one."""
    if m := _LD_CANNOT_FIND_RE.search(line):
        lib = m["lib"]
        message = f"cannot find -l{lib}"
        if lib.startswith(("cuda", "cublas", "curand", "cufft", "cusparse", "cusolver", "nvrtc")):
            message += f": {CUDA_HOME_HINT}"
        add(Diagnostic(severity="error", message=message, tool="ld"))
        return True
    for regex, what in ((_LD_UNDEF_RE, "undefined reference to"), (_LD_MULTI_RE, "multiple definition of")):
        if m := regex.search(line):
            sym = m["sym"]
            name = demangle([sym]).get(sym, sym)
            loc = _LD_LOC_RE.match(line)
            file, lineno = (loc["file"], int(loc["line"])) if loc else (pending or (None, None))
            objects = ([pending_object] if pending_object else []) + _LD_OBJECT_RE.findall(line)
            if file is None and objects:
                file = object_source(objects[0], root)
            if what.startswith("multiple"):
                also = f" (also defined in {object_source(objects[1], root)})" if len(objects) > 1 else ""
                hint = also + ": define each extern \"C\" launcher in exactly one .cu file"
            else:
                hint = ": it is declared but defined in no source file, or a library is missing from the link"
            add(Diagnostic(
                severity="error", message=f"{what} {name}{hint}",
                file=relative_to(file, root) if file else None, line=lineno, tool="ld",
            ))
            return True
    if _LD_PREFIX_RE.match(line) and ("error" in line or "returned" in line):
        if "ld returned" in line:
            return True  # collect2's summary adds nothing to the lines above it
        add(Diagnostic(severity="error", message=line.split(": ", 1)[-1].strip(), tool="ld"))
        return True
    return False


def parse_kernel_resources(text: str) -> list[KernelResources]:
    """ptxas -v figures per (kernel, arch), mangled names as printed."""
    kernels: dict[tuple[str, str], KernelResources] = {}
    current: KernelResources | None = None
    props_for: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if m := _PTXAS_ENTRY_RE.match(line):
            key = (m["name"], m["arch"])
            current = kernels.setdefault(key, KernelResources(kernel=m["name"], arch=m["arch"]))
            props_for = None
            continue
        if m := _PTXAS_PROPS_FOR_RE.match(line):
            props_for = m["name"]
            continue
        if m := _PTXAS_FRAME_RE.search(line):
            if current is not None and props_for in (None, current.kernel):
                current.stack_frame_bytes = int(m["stack"])
                current.spill_stores_bytes = int(m["stores"])
                current.spill_loads_bytes = int(m["loads"])
            continue
        if m := _PTXAS_USED_RE.match(line):
            if current is not None:
                current.registers = int(m["regs"])
                rest = m["rest"]
                smem = _SMEM_RE.search(rest)
                current.shared_bytes = int(smem.group(1)) if smem else 0
                cmem = [int(c) for c in _CMEM_RE.findall(rest)]
                current.constant_bytes = sum(cmem) if cmem else None
            continue
    return list(kernels.values())


@dataclass
class NinjaStep:
    """One command ninja ran, with the output printed after it."""

    command: str
    source: str | None  # the file compiled (``-c SRC``), None for the link step
    output: str = ""
    failed: bool = False


def ninja_steps(text: str) -> list[NinjaStep]:
    """Split ``ninja -v`` output into its steps (ninja prints a step's output right after its line)."""
    steps: list[NinjaStep] = []
    current: NinjaStep | None = None
    expect_command = False
    buffer: list[str] = []

    def close() -> None:
        if current is not None:
            current.output = "\n".join(buffer)
        buffer.clear()

    for raw in text.splitlines():
        line = raw.rstrip()
        if expect_command and current is not None:
            current.command = line
            src = _COMPILE_SOURCE_RE.search(line)
            current.source = src["src"].strip("'\"") if src else None
            expect_command = False
            continue
        if m := _NINJA_STEP_RE.match(line):
            close()
            src = _COMPILE_SOURCE_RE.search(m["cmd"])
            current = NinjaStep(command=m["cmd"], source=src["src"].strip("'\"") if src else None)
            steps.append(current)
            continue
        if _NINJA_FAILED_RE.match(line):
            if current is not None and not buffer:
                steps.pop()  # the "[i/N]" line of the failing step comes right before FAILED
            close()
            current = NinjaStep(command="", source=None, failed=True)
            steps.append(current)
            expect_command = True
            continue
        if line.startswith(("ninja: ", "KERNELPILOT_BUILD_RESULT ")):
            close()
            current = None
            continue
        if current is not None:
            buffer.append(raw)
    close()
    return steps


def compiled_sources(text: str, *, root: Path | None = None) -> list[str]:
    """Sources that ninja compiled in this run (from ``ninja -v`` command lines), in order."""
    sources: list[str] = []
    for raw in text.splitlines():
        m = _NINJA_STEP_RE.match(raw.strip())
        if not m:
            continue
        src = _COMPILE_SOURCE_RE.search(m["cmd"])
        if src:
            name = relative_to(src["src"].strip("'\""), root)
            if name not in sources:
                sources.append(name)
    return sources


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Map mangled C++ names to readable ones with cu++filt or c++filt; unchanged when neither exists."""
    wanted = [n for n in dict.fromkeys(names) if n.startswith("_Z")]
    result = {n: n for n in names}
    if not wanted:
        return result
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None:
        return result
    try:
        proc = subprocess.run([tool], input="\n".join(wanted) + "\n", capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return result
    lines = proc.stdout.splitlines()
    if proc.returncode == 0 and len(lines) == len(wanted):
        result.update({m: d.strip() or m for m, d in zip(wanted, lines)})
    return result


def demangle_kernels(kernels: list[KernelResources]) -> list[KernelResources]:
    names = demangle(k.kernel for k in kernels)
    for k in kernels:
        k.kernel = names.get(k.kernel, k.kernel)
    return kernels


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])
