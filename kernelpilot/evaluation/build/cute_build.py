"""The build step of a CuTe-DSL candidate (``@cute.kernel`` / ``@cute.jit`` functions, candidate.py).

The DSL compiles a kernel for the arguments its ``cute.compile`` call is given (dtypes, static shapes and
strides, alignment): a forward builds those from real tensors (``from_dlpack``), so nothing is compiled here.
This step checks, without importing the DSL or torch, that the DSL is installed in the Python the worker runs
and that its CUDA flavour matches torch's (``torch.version.cuda``); without it the verdict is ``build_error``
with one line naming ``pip install 'kernelpilot[cute]'`` (fail closed). The kernels then compile in the worker's
``build_warmup`` phase, one forward before verification, counted as build time and bounded by the build limit
(worker/cute_hook.py), and the compiled functions are kept in a cache across workers and sessions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from kernelpilot.evaluation.candidate import Candidate, cute_kernels
from kernelpilot.verdict import BuildReport, Diagnostic

DSL_DIST = "nvidia-cutlass-dsl"
DSL_VERSION = "4.8.1"  # pinned: pyproject's [cute] extra
INSTALL_HINT = "pip install 'kernelpilot[cute]'"
CACHE_ENV = "CUTE_DSL_CACHE_DIR"  # where the worker keeps compiled functions (and the DSL its own files)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def torch_cuda_version() -> str | None:
    """``torch.version.cuda`` of the installed torch, read from its file (torch is not imported here)."""
    try:
        dist = metadata.distribution("torch")
        version_file = Path(str(dist.locate_file("torch/version.py")))
        text = version_file.read_text(encoding="utf-8")
    except (metadata.PackageNotFoundError, OSError):
        return None
    match = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*['\"]([\d.]+)['\"]", text, re.M)
    return match.group(1) if match else None


def wheel_for(cuda: str | None) -> str:
    """The DSL install that matches a torch built for CUDA ``cuda``."""
    major = (cuda or "").split(".")[0]
    if major == "12":
        return f"{DSL_DIST}=={DSL_VERSION}"
    return f"{DSL_DIST}[cu13]=={DSL_VERSION}"  # CUDA 13 (the default torch of our GPU machines)


def dsl_problem() -> tuple[str, str]:
    """("error" | "warning" | "", the message): whether the CuTe DSL can build a candidate in this Python."""
    cuda = torch_cuda_version()
    installed = _version(DSL_DIST)
    if installed is None:
        return "error", (f"this candidate's kernels are CuTe DSL (@cute.kernel / @cute.jit) and the DSL is not "
                         f"installed: {INSTALL_HINT} (installs {wheel_for(cuda)}, for torch's CUDA {cuda or '?'})")
    major = (cuda or "").split(".")[0]
    flavours = [f for f in ("cu12", "cu13") if _version(f"{DSL_DIST}-libs-{f}") is not None]
    if major in ("12", "13") and f"cu{major}" not in flavours:
        return "error", (f"the CuTe DSL installed has libraries for {', '.join(flavours) or 'no CUDA'} and torch runs "
                         f"CUDA {cuda}: pip install '{wheel_for(cuda)}' ({INSTALL_HINT} on a CUDA 13 torch)")
    if installed != DSL_VERSION:
        return "warning", (f"{DSL_DIST} {installed} is installed; kernelpilot pins {DSL_VERSION} "
                           f"({INSTALL_HINT}): compile times and kernel names may differ")
    return "", ""


def dsl_versions() -> str:
    """The DSL's distributions and versions (part of the compile cache's key)."""
    dists = [DSL_DIST, *(f"{DSL_DIST}-libs-{f}" for f in ("base", "core", "cu12", "cu13"))]
    return ";".join(f"{d}={_version(d)}" for d in dists)


def build_cute(candidate: Candidate, *, env: Mapping[str, str], directory: Path) -> BuildReport:
    """The build report of a CuTe candidate: an error without the DSL, else a note on where it compiles."""
    report = BuildReport(ok=False, arch=str(env.get("KERNELPILOT_ARCH", "")), build_dir=str(directory),
                         command="(CuTe DSL: compiled by cute.compile in the worker's warm-up)")
    severity, message = dsl_problem()
    if severity == "error":
        report.diagnostics.append(Diagnostic("error", message, tool="cute"))
        return report
    if severity:
        report.diagnostics.append(Diagnostic("warning", message, tool="cute"))
    kernels = cute_kernels(candidate)
    report.ok = True
    report.diagnostics.append(Diagnostic("note", (
        "CuTe kernels (" + (", ".join(kernels) or "none named") + ") compile in the worker's warm-up, counted as "
        f"build time under the build limit, and are kept compiled in {env.get(CACHE_ENV) or 'the CuTe cache'}"),
        tool="cute"))
    return report
