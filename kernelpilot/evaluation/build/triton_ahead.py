"""The build step of a Triton candidate: every ``@triton.jit`` kernel compiled ahead of time, no GPU needed.

Triton compiles a kernel for one specialisation (argument dtypes, alignment of pointers, integers
equal to 1 or divisible by 16, constexpr values, num_warps/num_stages), which it learns from the
launch. So the build runs ``ModelNew.forward`` once in a subprocess, on fake CUDA tensors (torch's
FakeTensorMode: shapes, dtypes, strides, no memory, no GPU) with the problem's real shapes and dtypes,
and with Triton's launcher replaced by its own ``warmup`` path:
every launch is compiled by Triton itself (``triton.compile`` for an explicit ``GPUTarget``, through a
stand-in driver that answers the target and never touches CUDA) and nothing is launched. The compiled
kernels land in ``TRITON_CACHE_DIR`` (the worker's cache), so the worker's first launch of the same
specialisation loads the cubin instead of compiling.

What cannot be compiled ahead is said in the build report (a ``note``), and the worker compiles it in
its ``build_warmup`` phase, one forward call before verification (engine.py): an autotuned kernel
(each config is compiled here; the choice is a benchmark on the GPU), or a forward that does not run
on fake tensors (``.item()``, data-dependent shapes, torch.cuda calls). Compilation errors become diagnostics at the
kernel's file and line. Per-kernel registers and local memory (Triton's ``n_regs``/``n_spills``) come
from ``cuobjdump -res-usage`` on the cubin.

Child side: triton_child.py (``python -m kernelpilot.evaluation.build.triton_child MODEL_FILE PROBLEM CAPABILITY``).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernelpilot.evaluation.build.processes import (
    run_in_session,
    scratch_dir,
    superseded_report,
)
from kernelpilot.evaluation.build.triton_child import RESULT_MARKER
from kernelpilot.evaluation.candidate import Candidate
from kernelpilot.verdict import BuildReport, Diagnostic, KernelResources



# ---- caller side (no torch, no triton) -------------------------------------------------------------
def capability_of(arch: str) -> int:
    """``"sm_90a"`` / ``"9.0"`` -> 90 (the GPUTarget capability)."""
    from kernelpilot.toolkit import normalize_arch

    return int(normalize_arch(arch)[3:].rstrip("af"))


def build_triton(candidate: Candidate, *, problem: Path | None, env: Mapping[str, str], timeout_s: float,
                 directory: Path, cancel: Any = None, confine: bool = False, standby: Any = None) -> BuildReport:
    """Compile ``candidate``'s Triton kernels ahead of time in a killable subprocess; never raises.
    ``cancel`` (supersede.CancelToken): a newer save kills the build; ``confine``: the subprocess runs under
    build_sandbox.py's rules (it runs the candidate's forward); ``standby`` (standby.Standby): a process that
    imported torch and Triton already takes the build."""
    from kernelpilot.toolkit import detect_arch, normalize_arch

    arch = normalize_arch(env["KERNELPILOT_ARCH"]) if env.get("KERNELPILOT_ARCH") else (
        normalize_arch(env["TORCH_CUDA_ARCH_LIST"].split(";")[0]) if env.get("TORCH_CUDA_ARCH_LIST")
        else detect_arch(env))
    report = BuildReport(ok=False, arch=arch, build_dir=str(directory))
    if problem is None:
        report.ok = True
        report.diagnostics.append(Diagnostic("note", "no problem given: the Triton kernels compile at the worker's "
                                             "warm-up (their signature comes from the problem's inputs)",
                                             tool="triton"))
        return report
    argv = [sys.executable, "-m", "kernelpilot.evaluation.build.triton_child", str(candidate.model_file),
            str(Path(problem).resolve()),
            str(capability_of(arch))]
    report.command = shlex.join(argv)
    record = _record_path(candidate, Path(problem), arch, env)
    if record is not None and (cached := _cached(record)) is not None:
        return cached

    # run from a folder of kernelpilot's (what the candidate writes to a relative path stays out of the user's
    # folder; its own modules are found through sys.path), confined as the worker is (build_sandbox.py)
    run_env, cwd, unconfined = dict(env), scratch_dir(Path(directory)), ""
    if confine:
        from kernelpilot.evaluation.sandbox.build_step import confine_build

        cache = [Path(env["TRITON_CACHE_DIR"])] if env.get("TRITON_CACHE_DIR") else []
        unconfined = confine_build(run_env, Path(directory), [candidate.root, Path(problem).resolve().parent], cache)
    start = time.monotonic()
    waiting = standby.take("triton", argv[3:], run_env, str(cwd)) if standby is not None else None
    output, timed_out, returncode = run_in_session(argv, run_env, cwd=cwd, timeout_s=timeout_s, proc=waiting,
                                                   cancel=cancel)
    if cancel is not None and cancel.cancelled:
        return superseded_report(directory, report.command, time.monotonic() - start)
    report.seconds = round(time.monotonic() - start, 3)
    report.log_tail = "\n".join(output.strip().splitlines()[-40:])
    if unconfined:
        from kernelpilot.evaluation.sandbox.build_step import unconfined_note

        report.diagnostics.append(Diagnostic("note", unconfined_note(unconfined), tool="build"))
    if timed_out:
        report.timed_out = True
        report.diagnostics.append(Diagnostic("error", f"the Triton build timed out after {timeout_s:g} s and was "
                                             "killed", tool="build"))
        return report
    result = _result_line(output)
    if not result:
        report.diagnostics.append(Diagnostic("error", f"the Triton build exited with status {returncode} without a "
                                             "result (see the log)", tool="build"))
        return report
    for d in result.get("diagnostics", []):
        file = d.get("file")
        report.diagnostics.append(Diagnostic(d["severity"], d["message"],
                                             candidate.relative(Path(file)) if file else None,
                                             d.get("line"), d.get("column"), d.get("tool", "triton")))
    report.kernels = [KernelResources(**k) for k in result.get("kernels", [])]
    report.ok = bool(result.get("ok")) and returncode == 0
    if report.ok and record is not None:
        _store(record, report)
    return report


# ---- the build record: the same candidate for the same problem is built once -----------------------
# The suite builds a candidate in its build pool and then evaluates it on a GPU slot, and the pairing loop
# evaluates one file many times: without a record the slot compiled every kernel again (8-10 s per
# Inductor c0 on the H200). The record is kept beside Triton's cache, whose cubins it describes; if they
# have gone, the worker's warm-up compiles them again (its seconds count as build time).
RECORD_DIR = "kernelpilot-triton-builds"


def _record_path(candidate: Candidate, problem: Path, arch: str, env: Mapping[str, str]) -> Path | None:
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    cache = env.get("TRITON_CACHE_DIR")
    if not cache:
        return None
    digest = hashlib.sha256()
    try:
        files = sorted({Path(candidate.model_file), *(Path(f) for f in getattr(candidate, "files", []) or [])})
        for f in files:
            digest.update(str(f.name).encode() + b"\0" + f.read_bytes() + b"\0")
        digest.update(problem.resolve().read_bytes())
    except OSError:
        return None
    for dist in ("torch", "triton"):
        try:
            digest.update(b"\0" + version(dist).encode())
        except PackageNotFoundError:
            digest.update(b"\0-")
    digest.update(b"\0" + arch.encode() + b"\0" + sys.executable.encode())
    return Path(cache) / RECORD_DIR / f"{digest.hexdigest()[:24]}.json"


def _cached(record: Path) -> BuildReport | None:
    from kernelpilot.verdict import from_plain

    try:
        report = from_plain(BuildReport, json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if not report.ok:
        return None
    report.seconds, report.cache = 0.0, "hit"
    return report


def _store(record: Path, report: BuildReport) -> None:
    import dataclasses
    import os

    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(report)))
        os.replace(tmp, record)
    except OSError:
        pass  # no record: the next evaluation builds again


def _result_line(output: str) -> dict[str, Any]:
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                return dict(json.loads(line[len(RESULT_MARKER):]))
            except json.JSONDecodeError:
                return {}
    return {}

