"""`kernelpilot doctor` on this machine (no GPU): the toolchain checks, a broken linker named with its fix, and the
tiny candidates' build-only verdicts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="needs g++ and the CUDA toolkit")


def _doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "kernelpilot", "doctor", "--json", *args], capture_output=True,
                          text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}, timeout=600)
    return proc.returncode, json.loads(proc.stdout)


def test_the_toolchain_is_ready_for_build_only_verdicts(tmp_path: Path) -> None:
    code, out = _doctor("--no-candidates", env={"KERNELPILOT_TOOLCHAIN_CACHE": str(tmp_path / "t.json")})
    checks = {c["name"]: c for c in out["checks"]}
    assert code == 0 and out["ready"]
    assert checks["GPU"]["status"] == "warn" and not checks["GPU"]["essential"]
    assert checks["linker"]["status"] == "ok" and "builds link with" in checks["linker"]["detail"]
    assert checks["headers"]["status"] == "ok" and checks["ninja"]["status"] == "ok"


def test_a_machine_where_nothing_links_is_not_ready_and_says_what_to_do(tmp_path: Path) -> None:
    bad = tmp_path / "bin" / "g++"
    bad.parent.mkdir()
    bad.write_text(f'#!/bin/sh\ncase " $* " in *" -shared "*) echo "ld: cannot find -lstdc++" >&2; exit 1;; esac\n'
                   f'exec {shutil.which("g++")} "$@"\n')
    bad.chmod(0o755)
    code, out = _doctor("--no-candidates",
                        env={"CXX": str(bad), "KERNELPILOT_TOOLCHAIN_CACHE": str(tmp_path / "t.json")})
    linker = next(c for c in out["checks"] if c["name"] == "linker")
    assert code == 1 and not out["ready"]
    assert linker["status"] == "fail" and "cannot find -lstdc++" in linker["detail"] and linker["fix"]


@pytest.mark.slow
def test_the_tiny_candidates_get_build_only_verdicts() -> None:
    code, out = _doctor()
    checks = {c["name"]: c for c in out["checks"]}
    assert code == 0, out
    assert checks["native candidate"]["status"] == "ok" and "built" in checks["native candidate"]["detail"]
    assert checks["kernel edit"]["status"] == "ok"  # built as device code alone, or the check fails
    assert "edit that breaks it" not in checks  # a GPU check: a build-only verdict cannot be incorrect
    assert checks["Triton candidate"]["status"] == "ok"
