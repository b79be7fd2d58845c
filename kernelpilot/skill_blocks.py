"""Compile the code blocks of skill documents with nvcc (used by the tests and by skill authors).

Info-string conventions for fenced blocks in ``skills/*.md``:

``cuda``                    a complete translation unit, compiled ``nvcc -arch=sm_90 -c``
``cuda sm_90a``             the same, compiled ``-gencode=arch=compute_90a,code=sm_90a``
``cuda fragment``           code at namespace scope (may add its own #includes); wrapped after
                            :data:`PRELUDE` (cstdint, cstdio, cuda_runtime.h, cuda_bf16.h)
``cuda fragment-body``      statements; wrapped into ``__global__ void kp_fragment_body()``
``cpp`` (+ the same tags)   host C++ compiled as a ``.cpp`` file by nvcc's host compiler
``cpp torch``               needs the PyTorch headers (C++20, ~35 s to parse): syntax-checked by
                            the test marked ``slow`` only, never in the quick CI pass
``cuda pattern=NAME``       a complete kernel pattern that the GPU test also builds and runs

Any other language (``python``, ``bash``, ``text``) is not compiled.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.extension import INCLUDE_DIR
from kernelpilot.skills import CodeBlock
from kernelpilot.toolkit import find_cuda_home

COMPILED_LANGUAGES = ("cuda", "cu", "cpp", "c++")

# Kept small on purpose: cooperative_groups.h and <cuda/barrier> each add several seconds of
# nvcc time, so a fragment that needs them includes them itself (fragments sit at namespace scope).
PRELUDE = """\
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
"""

HOST_PRELUDE = """\
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
"""


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    command: str
    output: str
    seconds: float


def cuda_home() -> Path:
    """The CUDA toolkit's root (kernelpilot.toolkit.find_cuda_home)."""
    return Path(find_cuda_home())


def is_compiled(block: CodeBlock) -> bool:
    return block.language in COMPILED_LANGUAGES


def needs_torch(block: CodeBlock) -> bool:
    return "torch" in block.tags


def pattern_name(block: CodeBlock) -> str | None:
    for tag in block.tags:
        if tag.startswith("pattern="):
            return tag.split("=", 1)[1]
    return None


def translation_unit(block: CodeBlock) -> tuple[str, str]:
    """(source text, file suffix) for a block, wrapped as its info string asks."""
    host = block.language in ("cpp", "c++")
    suffix = ".cpp" if host else ".cu"
    if "fragment-body" in block.tags:
        if host:
            return HOST_PRELUDE + "void kp_fragment_body() {\n" + block.code + "}\n", suffix
        return PRELUDE + "__global__ void kp_fragment_body() {\n" + block.code + "}\n", suffix
    if "fragment" in block.tags:
        return (HOST_PRELUDE if host else PRELUDE) + block.code, suffix
    return block.code, suffix


def arch_flags(block: CodeBlock) -> list[str]:
    if "sm_90a" in block.tags:
        return ["-gencode=arch=compute_90a,code=sm_90a"]
    return ["-arch=sm_90"]


def library_include_flags(code: str, *, always: bool = False) -> list[str]:
    """``-isystem`` flags for cuBLAS/cuDNN headers when the block uses them.

    A minimal toolkit (nvcc only) lacks these headers; the CUDA wheels PyTorch installs
    (``site-packages/nvidia/*/include``) carry them. ``-isystem`` dirs are searched after nvcc's
    own ``-I`` include dir, so they only supply headers the toolkit lacks.
    """
    if not always and not any(lib in code for lib in ("cublas", "cudnn")):
        return []
    import site
    import sysconfig

    roots = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    flags: list[str] = []
    for root in sorted(roots):
        for include in sorted(Path(root).glob("nvidia/*/include")):
            flags += ["-isystem", str(include)]
    return flags


def torch_flags() -> list[str]:
    """Include flags for blocks tagged ``torch`` (imports torch; slow)."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    flags = [f"-I{p}" for p in include_paths()]
    flags.append(f"-I{sysconfig.get_paths()['include']}")
    flags.append(f"-I{INCLUDE_DIR}")  # kernelpilot/launch.h
    return flags + ["-DTORCH_EXTENSION_NAME=kp_skill_block", "-std=c++20"]


def compile_block(block: CodeBlock, workdir: Path | None = None, *, timeout_s: float = 300) -> BuildResult:
    """Compile one block to an object file (syntax-only for ``torch`` blocks)."""
    import time

    source, suffix = translation_unit(block)
    nvcc = cuda_home() / "bin" / "nvcc"
    owned = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="kp-skill-")) if workdir is None else workdir
    try:
        src = directory / f"block{block.index}{suffix}"
        src.write_text(source, encoding="utf-8")
        if needs_torch(block):
            cxx = shutil.which("c++") or shutil.which("g++") or "c++"
            # ATen/cuda headers pull in cuBLAS/cuSPARSE headers: add the CUDA wheels' include dirs.
            cmd = [cxx, "-fsyntax-only", *torch_flags(), f"-I{cuda_home() / 'include'}"]
            cmd += [*library_include_flags(block.code, always=True), str(src)]
        else:
            cmd = [str(nvcc), "-c", "-std=c++17", *arch_flags(block), *library_include_flags(block.code),
                   f"-I{Path(__file__).resolve().parent / 'include'}", str(src)]
            cmd += ["-o", str(src.with_suffix(".o"))]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return BuildResult(False, " ".join(cmd), f"timed out after {timeout_s:.0f} s", time.monotonic() - start)
        output = (proc.stdout + proc.stderr).strip()
        return BuildResult(proc.returncode == 0, " ".join(cmd), output, time.monotonic() - start)
    finally:
        if owned:
            shutil.rmtree(directory, ignore_errors=True)
