"""The build step of a kernel edit: device code only, when the candidate's last full build allows it.

:func:`device_only_build` returns the build report of a device-only build (kernelpilot/native/device_build.py:
``nvcc -cubin`` of the edited .cu files, in parallel parts, under ninja, in a session of its own that a newer
save's cancel or the timeout kills), or the reason this save needs a full build. Each part's ptxas figures
are kept beside its cubin, so a part taken from the cache reports the figures of the code it holds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.build import diagnostics as diag
from kernelpilot.evaluation.build.processes import run_in_session
from kernelpilot.evaluation.build.standby import LOAD, Standby
from kernelpilot.evaluation.candidate import Candidate
from kernelpilot.evaluation.supersede import CancelToken
from kernelpilot.extension import (
    ExtensionSpec,
    make_spec,
    ninja_is_current,
    options_from_source,
)
from kernelpilot.native import device_build, identity
from kernelpilot.native.code_text import code_digests
from kernelpilot.native.device_build import DevicePlan, Part
from kernelpilot.native.records import (
    FULL_FILE,
    clear_device,
    full_build_files,
    read_device,
    read_full,
    record_full_build,
)
from kernelpilot.verdict import BuildReport, Diagnostic, KernelResources

SourcesRead = tuple[dict[str, str], dict[str, str]]  # code_text.code_digests: (bytes, code)
DEVICE_ONLY = "device code only"  # how the report's command starts, and the note's word for this path


def directory_spec(candidate: Candidate, directory: Path, env: dict[str, str]) -> ExtensionSpec | str:
    """What this save of a directory candidate builds (model_new.py's load_extension options), or why it
    cannot be said without torch's builder (which then reports it)."""
    try:
        return make_spec(candidate.path, build_dir=directory, env=env, **options_from_source(candidate.model_file))
    except KernelpilotError as exc:
        return str(exc)


def device_only_build(candidate: Candidate, directory: Path, env: dict[str, str], spec: ExtensionSpec | str, *,
                      timeout_s: float, cancel: CancelToken | None = None,
                      on_plan: Callable[[DevicePlan], None] | None = None) -> BuildReport | str:
    """The report of this save's device-only build, or why it needs a full build. ``on_plan`` sees the plan
    before anything compiles (the SASS check starts its own compile then)."""
    if isinstance(spec, str):
        return spec
    # the full build's flags, arch, sources and toolchain must be this save's (model_new.py's options)
    if not ninja_is_current(spec, env):
        return "the build's options, sources or toolchain changed since the last full build"
    plan = device_build.plan(candidate.path, directory, parts=device_build.parallel_parts(env))
    if isinstance(plan, str):
        return plan
    if on_plan is not None:
        on_plan(plan)
    start = time.monotonic()
    output, timed_out, returncode = "", False, 0
    missing = plan.missing
    if missing:
        ninja = (shutil.which("ninja", path=env.get("PATH"))
                 or shutil.which("ninja", path=str(Path(sys.executable).parent)))
        if ninja is None:
            return "ninja is not installed"
        argv = [ninja, "-v", "-f", str(device_build.ninja_file(plan, directory)), "-j", str(len(missing))]
        output, timed_out, returncode = run_in_session(argv, env, cwd=directory, timeout_s=timeout_s,
                                                       cancel=cancel)
    seconds = time.monotonic() - start
    report = BuildReport(ok=False, seconds=round(seconds, 3), build_dir=str(directory), arch=spec.arch,
                         command=f"{DEVICE_ONLY}: nvcc -cubin, {len(plan.parts)} part(s) of "
                                 f"{', '.join(p.name for p in plan.affected) or 'no edited file'}, "
                                 f"{len(missing)} compiled")
    if cancel is not None and cancel.cancelled:
        report.diagnostics.append(Diagnostic(severity="note", tool="build",
                                             message="superseded: a newer save cancelled this build"))
        return report
    report.diagnostics = diag.parse_diagnostics(output, root=candidate.root)
    report.rebuilt = list(dict.fromkeys(p.source.name for p in missing))
    report.log_tail = diag.tail(output)
    if timed_out:
        report.timed_out = True
        report.diagnostics.append(Diagnostic(severity="error", tool="build",
                                             message=f"build timed out after {timeout_s:g} s and was killed"))
        return report
    if returncode != 0 or any(not p.cubin.is_file() for p in plan.parts):
        if not any(d.severity == "error" for d in report.diagnostics):
            report.diagnostics.append(Diagnostic(severity="error", tool="build", message=(
                f"nvcc -cubin exited with status {returncode} without an error message (see the log)")))
        return report
    _keep_resources(plan, output)
    gone = device_build.missing_kernels(plan)
    if gone:
        names = ", ".join(diag.demangle(gone[:3]).values())
        return f"the edited code no longer defines kernels binding.cpp launches ({names})"
    device_build.finish(plan, directory)
    report.ok = True
    report.kernels = _resources(plan, directory)
    report.diagnostics.append(Diagnostic(severity="note", tool="build", message=(
        f"{DEVICE_ONLY}: the kernels of {', '.join(p.name for p in plan.affected) or 'no file'} replace those "
        "of the last full build in its library (binding.cpp unchanged)")))
    return report


def _part_of(plan: DevicePlan, source: str | None) -> Part | None:
    if source is None:
        return None
    return next((p for p in plan.parts if str(p.copy) == source or p.copy.name == Path(source).name), None)


def _keep_resources(plan: DevicePlan, output: str) -> None:
    """Each compiled part's ptxas figures, beside its cubin."""
    for step in diag.ninja_steps(output):
        part = _part_of(plan, step.source)
        if part is None or step.failed:
            continue
        kernels = diag.demangle_kernels(diag.parse_kernel_resources(step.output))
        part.cubin.with_suffix(".json").write_text(json.dumps([asdict(k) for k in kernels], indent=1))


def _resources(plan: DevicePlan, directory: Path) -> list[KernelResources]:
    """The figures of every kernel: the parts' for edited files, the full build's for the others."""
    out: list[KernelResources] = []
    edited = {str(p) for p in plan.affected}
    try:
        cached: dict[str, list[dict]] = json.loads((directory / "kernelpilot-resources.json").read_text())
    except (OSError, ValueError):
        cached = {}
    for source in sorted(cached):
        if source not in edited:
            out += [KernelResources(**k) for k in cached[source]]
    seen: set[str] = set()
    for part in plan.parts:
        try:
            kernels = json.loads(part.cubin.with_suffix(".json").read_text())
        except (OSError, ValueError):
            continue
        for k in kernels:
            if k["kernel"] not in seen:
                seen.add(k["kernel"])
                out.append(KernelResources(**k))
    return out


def sources_before_full_build(candidate: Candidate, spec: ExtensionSpec | str) -> SourcesRead | None:
    """The digests of what a full build of ``candidate`` reads, taken as it starts (``after_full_build``'s
    ``before``): of each file's bytes, and of its code without comments."""
    if isinstance(spec, str):
        return None
    return code_digests(full_build_files(candidate.path.resolve(), spec.sources))


def after_full_build(report: BuildReport, candidate: Candidate, directory: Path, env: dict[str, str],
                     spec: ExtensionSpec | str, reason: str, before: SourcesRead | None,
                     standby: Standby | None = None) -> None:
    """Record a successful full build for the next edit's device-only build (``before``: its sources' digest as it
    started, ``sources_before_full_build``; without it nothing is recorded and the next save builds in full); say
    why this save took it. A
    build by ninja alone is not test-loaded: a library that needs symbols the last full build did not need
    (a kernel instance binding.cpp launches and no .cu defines any more) is loaded here first, by ``standby``
    when one waits (``load_error``)."""
    if reason and reason != device_build.NO_FULL_BUILD:
        report.diagnostics.append(Diagnostic(severity="note", tool="build", message=f"full build: {reason}"))
    if not report.ok:
        clear_device(directory)
        return
    if isinstance(spec, str) or before is None or not spec.library.is_file():
        return
    previous = read_full(directory)
    record = record_full_build(candidate.path.resolve(), directory, spec.library, spec.sources, before=before[0],
                               before_code=before[1])
    if record is None or previous is None or "kernelpilot.extension" in report.command:
        return
    if set(record.undefined) - set(previous.undefined):
        error = load_error(spec.library, env, standby)
        if error:
            report.ok = False
            report.diagnostics += diag.parse_diagnostics(error, root=candidate.root) or [
                Diagnostic(severity="error", tool="build", message=error.strip().splitlines()[-1][:300])]
            clear_device(directory)
            (directory / FULL_FILE).unlink(missing_ok=True)


_LOAD_CHECK = "import ctypes, os, sys, torch\nctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_LOCAL)\n"
LOAD_TIMEOUT_S = 120.0


def load_error(library: Path, env: dict[str, str], standby: Standby | None = None) -> str:
    """'' when ``library`` loads with every symbol bound (torch's libraries loaded first), else the loader's words.

    Checked by the ``standby`` builder when one waits with the loader's environment of ``env``: it imported torch
    already, where a fresh process spends seconds on it (2.1 s of a 2.1 s check on our CPU machine), after the
    build's clock stopped."""
    waiting = standby.take(LOAD, [str(library)], env, str(library.parent)) if standby and standby.serves(env) else None
    if waiting is None:
        proc = subprocess.run([sys.executable, "-c", _LOAD_CHECK, str(library)], env=env, capture_output=True,
                              text=True, timeout=LOAD_TIMEOUT_S)
        return "" if proc.returncode == 0 else (proc.stderr or proc.stdout)[-2000:]
    output, timed_out, returncode = run_in_session([], env, cwd=library.parent, timeout_s=LOAD_TIMEOUT_S, proc=waiting)
    if timed_out:
        return f"loading {library.name} did not finish in {LOAD_TIMEOUT_S:g} s"
    return "" if returncode == 0 else (output.strip() or f"the load check exited with status {returncode}")[-2000:]


def sass_wait(mode: str, timed: bool) -> float | None:
    """How long a verdict of a device-only build waits for its SASS check (None: until it ends). A benchmark's
    times stand only once the check has compared its kernels with the plain build's; a benchmark that timed
    nothing (incorrect, rejected) is a test verdict, and none of those waits (the check shows ``pending``)."""
    return None if mode == "benchmark" and timed else 0.0


class SassCheck:
    """The identity check of a device-only build (native/identity.py), beside the worker's request.

    :meth:`start` (the build's ``on_plan``) begins the plain build's compile of each edited file as soon as the
    parts are planned; :meth:`begin`, once the device-only build succeeded, compares in a thread; :meth:`stop`
    kills the compiles of a build that failed, was superseded or took the full build."""

    def __init__(self, env: dict[str, str]) -> None:
        self.result = ""
        self.seconds = 0.0  # the check's own seconds (from its compile's start), once it has finished
        self._env = env
        self._started: dict[str, identity.WholeCompile] = {}
        self._thread: threading.Thread | None = None

    def start(self, plan: DevicePlan) -> None:
        """The plain build's compile of every edited file this state has no answer for, from now."""
        for cu in plan.affected:  # each has its full build's command and at least one part (device_build.plan)
            if identity.answered([str(p.cubin) for p in plan.parts if p.source == cu]) is None:
                self._started[str(cu)] = identity.WholeCompile(str(cu), plan.full.commands[str(cu)], self._env)

    def begin(self, build_dir: Path) -> None:
        """Compare the device-only build in ``build_dir`` with the plain build's compiles, in a thread."""
        device, full = read_device(build_dir), read_full(build_dir)
        if device is None or full is None:
            self.stop()
            self.result = "not checked (no record of the device-only build)"
            return
        for source in [s for s in self._started if s not in device.parts]:
            self._started.pop(source).stop()
        first = min((w.started for w in self._started.values()), default=None)

        def run() -> None:
            started = first if first is not None else time.monotonic()
            try:
                self.result = identity.summary(identity.check(device, full, self._env, self._started))
            except Exception as exc:  # an unreadable cubin: a check that cannot run says so, it never passes
                self.result = f"not checked ({type(exc).__name__}: {exc})"[:200]
            self.seconds = round(time.monotonic() - started, 3)

        self._thread = threading.Thread(target=run, name="kp-sass-check", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        for whole in self._started.values():
            whole.stop()
        self._started.clear()

    def wait(self, timeout_s: float | None = None) -> str:
        """The summary line; 'pending' if it has not finished within ``timeout_s``."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                return "pending"
        return self.result
