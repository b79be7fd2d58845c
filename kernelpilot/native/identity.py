"""Is what a device-only build loaded the machine code a full build of the same files makes?

For each edited .cu: the full build's nvcc command on the whole file, with ``-cubin`` in place of ``-c`` (the
plain build's device compile: the same preprocessing, cicc and ptxas steps; ``-c`` runs the host half beside them,
which makes no device code, and took the check from about 2 s to 3.2-4.6 s on an H100, 2026-12-06); then every
kernel of it is compared with the same kernel in the device-only build's parts (elf.kernel_code: instructions,
relocations, attributes, register count, shared and constant sizes). That a ``-c`` build embeds exactly this
cubin is checked for every shipped example by tests/test_examples_device_code.py. The answer is kept beside the
parts, so each edited state is checked once. The compile can start as soon as the parts are planned
(:class:`WholeCompile`), beside their own compile.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelpilot.native import elf
from kernelpilot.native.device_build import cubin_argv
from kernelpilot.native.records import DeviceBuild, FullBuild

SAME = "same"
DIFFERS = "differs"
FAILED = "failed"  # the full compile itself failed: nothing to compare with (a fact, not a difference)


@dataclass
class Identity:
    status: str  # SAME | DIFFERS | FAILED
    kernels: int = 0
    differing: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


def _answer_file(cubins: list[str]) -> Path:
    first = Path(sorted(cubins)[0])
    return first.with_name(first.name.rsplit("-", 1)[0] + ".identity.json")


def answered(cubins: list[str]) -> Identity | None:
    """The answer kept for these parts (this edited state was checked before), if any."""
    try:
        return Identity(**json.loads(_answer_file(cubins).read_text()))
    except (OSError, ValueError, TypeError):
        return None


class WholeCompile:
    """The full build's device compile of one .cu (``-cubin`` in place of ``-c``), running in the background.

    Started when a kernel edit's parts are planned, beside their compile (the check's compile needs only the
    file and the full build's command): a benchmark's wait for the check then ends about when the parts'
    build, verification and timing do, not a whole compile after the parts' build. At nice 10, so the parts
    and the worker come first."""

    def __init__(self, source: str, full_argv: list[str], env: dict[str, str]) -> None:
        self.source = source
        self.started = time.monotonic()
        self._tmp = tempfile.mkdtemp(prefix="kp-identity-")
        argv = cubin_argv(full_argv, Path(source), Path(self._tmp) / "whole.cubin", Path(source).parent)
        self._proc: subprocess.Popen[str] | None = None
        self._error = ""
        try:
            self._proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          start_new_session=True, preexec_fn=lambda: os.nice(10))
        except OSError as exc:
            self._error = f"{type(exc).__name__}: {exc}"[:300]

    def codes(self, timeout_s: float = 600.0) -> dict[str, str] | str:
        """Kernel name -> code digest of the whole file's cubin, or why there is none."""
        try:
            if self._proc is None:
                return self._error
            try:
                out, err = self._proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.stop()
                return f"the compile took longer than {timeout_s:g} s"
            kept = sorted(Path(self._tmp).glob("*.cubin"))
            if self._proc.returncode != 0 or not kept:
                return (err or out or "no cubin kept")[-300:]
            return elf.kernel_codes(kept)
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def stop(self) -> None:
        """Kill the compile (its edit was superseded, failed or took the full build); drop its files."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self._proc.wait()
        shutil.rmtree(self._tmp, ignore_errors=True)


def check_source(source: str, full_argv: list[str], cubins: list[str], env: dict[str, str],
                 *, timeout_s: float = 600.0, whole: WholeCompile | None = None) -> Identity:
    """Compile ``source`` as the full build does (or take ``whole``, that compile started earlier) and compare
    its kernels with those of ``cubins``."""
    kept = answered(cubins)
    if kept is not None:
        if whole is not None:
            whole.stop()
        return kept
    whole = whole or WholeCompile(source, full_argv, env)
    codes = whole.codes(timeout_s)
    if isinstance(codes, str):
        return Identity(FAILED, error=codes or "no cubin kept")
    parts = elf.kernel_codes([Path(c) for c in cubins])
    differing = sorted(k for k in set(codes) | set(parts) if codes.get(k) != parts.get(k))
    result = Identity(SAME if not differing else DIFFERS, kernels=len(codes), differing=differing,
                      seconds=round(time.monotonic() - whole.started, 3))
    try:
        _answer_file(cubins).write_text(json.dumps(asdict(result)))
    except OSError:
        pass
    return result


def check(device: DeviceBuild, full: FullBuild, env: dict[str, str],
          started: dict[str, WholeCompile] | None = None) -> dict[str, Identity]:
    """Every edited .cu of a device-only build, checked against a full build of it (``started``: compiles
    begun earlier, by source)."""
    started = started or {}
    return {source: check_source(source, full.commands[source], cubins, env, whole=started.get(source))
            for source, cubins in device.parts.items() if source in full.commands}


def summary(results: dict[str, Identity]) -> str:
    """One line for the build report: 'same (N kernels)', 'differs: a, b' or 'not checked: why'."""
    if not results:
        return SAME + " (no edited kernel)"
    differing = [k for r in results.values() for k in r.differing]
    if differing:
        return f"{DIFFERS}: {', '.join(differing[:4])}"
    failed = [Path(s).name + ": " + r.error.splitlines()[-1] if r.error else Path(s).name
              for s, r in results.items() if r.status == FAILED]
    if failed:
        return f"not checked ({'; '.join(failed)[:200]})"
    return f"{SAME} ({sum(r.kernels for r in results.values())} kernels)"
