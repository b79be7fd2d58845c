"""Is what a device-only build loaded the machine code a full build of the same files makes?

For each edited .cu: the full build's nvcc command on the whole file, with ``-cubin`` in place of ``-c`` (the
plain build's device compile: the same preprocessing, cicc and ptxas steps; ``-c`` runs the host half beside them,
which makes no device code, and took the check from about 2 s to 3.2-4.6 s on an H100, 2026-12-06); then every
kernel of it is compared with the same kernel in the device-only build's parts (elf.kernel_code: instructions,
relocations, attributes, register count, shared and constant sizes). That a ``-c`` build embeds exactly this
cubin is checked for every shipped example by tests/test_examples_device_code.py. The answer is kept beside the
parts, so each edited state is checked once.
"""

from __future__ import annotations

import json
import os
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


def check_source(source: str, full_argv: list[str], cubins: list[str], env: dict[str, str],
                 *, timeout_s: float = 600.0) -> Identity:
    """Compile ``source`` as the full build does and compare its kernels with those of ``cubins``."""
    answer = _answer_file(cubins)
    try:
        return Identity(**json.loads(answer.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kp-identity-") as tmp:
        argv = cubin_argv(full_argv, Path(source), Path(tmp) / "whole.cubin", Path(source).parent)
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s,
                                  start_new_session=True, preexec_fn=lambda: os.nice(10))  # beside the worker
        except (OSError, subprocess.SubprocessError) as exc:
            return Identity(FAILED, error=f"{type(exc).__name__}: {exc}"[:300])
        kept = sorted(Path(tmp).glob("*.cubin"))  # the whole file's cubin
        if proc.returncode != 0 or not kept:
            return Identity(FAILED, error=(proc.stderr or proc.stdout or "no cubin kept")[-300:])
        whole = elf.kernel_codes(kept)
    parts = elf.kernel_codes([Path(c) for c in cubins])
    differing = sorted(k for k in set(whole) | set(parts) if whole.get(k) != parts.get(k))
    result = Identity(SAME if not differing else DIFFERS, kernels=len(whole), differing=differing,
                      seconds=round(time.monotonic() - start, 3))
    try:
        answer.write_text(json.dumps(asdict(result)))
    except OSError:
        pass
    return result


def check(device: DeviceBuild, full: FullBuild, env: dict[str, str]) -> dict[str, Identity]:
    """Every edited .cu of a device-only build, checked against a full build of it."""
    return {source: check_source(source, full.commands[source], cubins, env)
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
