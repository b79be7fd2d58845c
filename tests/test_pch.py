"""Precompiled headers for candidates' C++ sources: the preamble, the key, and real GCC compiles
through the compiler wrapper (a small preamble, so the one-time build takes seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpilot.evaluation.build import pch
from kernelpilot.evaluation.build.step import pch_summary


def test_preamble_is_the_leading_angle_includes() -> None:
    source = ("// binding for kernel.cu\n/* a block\n   comment */\n#include <torch/extension.h>\n\n"
              "#include <c10/cuda/CUDAGuard.h>  // streams\n#include \"local.h\"\n#include <vector>\nint x;\n")
    assert pch.preamble(source) == "#include <torch/extension.h>\n#include <c10/cuda/CUDAGuard.h>\n"
    assert pch.preamble("#define FOO 1\n#include <vector>\n") == ""  # a macro first could change the headers
    assert pch.preamble('#include "mine.h"\n') == ""


def test_compile_flags_leave_out_files_dependencies_and_the_extension_name() -> None:
    args = ["-MMD", "-MF", "binding.o.d", "-DTORCH_EXTENSION_NAME=kp_a_123", "-DTORCH_API_INCLUDE_EXTENSION_H",
            "-isystem", "/t/include", "-fPIC", "-std=c++17", "-O3", "-c", "/c/binding.cpp", "-o", "binding.o"]
    plan = pch.parse_compile(args)
    assert plan is not None and plan.source == Path("/c/binding.cpp")
    assert plan.flags == ["-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", "/t/include", "-fPIC", "-std=c++17", "-O3"]
    other = pch.parse_compile([a.replace("kp_a_123", "kp_b_456") for a in args])
    assert other is not None and pch.key_for("gcc", other.flags, "x", {}) == pch.key_for("gcc", plan.flags, "x", {})
    assert pch.key_for("gcc", plan.flags + ["-O2"], "x", {}) != pch.key_for("gcc", plan.flags, "x", {})
    assert pch.parse_compile(["main.o", "k.o", "-shared", "-o", "x.so"]) is None  # a link
    assert pch.parse_compile(["-c", "k.cu", "-o", "k.o"]) is None


def _compile(cxx: str, env: dict[str, str], src: Path, obj: Path, include: Path) -> str:
    out = subprocess.run([cxx, "-MMD", "-MF", f"{obj}.d", "-DTORCH_EXTENSION_NAME=kp_x", "-isystem", str(include),
                          "-fPIC", "-O2", "-c", str(src), "-o", str(obj)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return pch_summary(out.stderr)


def _symbols(obj: Path) -> list[str]:
    return subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.slow
def test_wrapper_builds_once_then_uses_the_header_and_notices_a_changed_header(tmp_path: Path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    (include / "kp_lib.h").write_text("#pragma once\n#include <map>\n#include <string>\n"
                                      "inline int kp_scale(int x) { return 3 * x; }\n")
    src = tmp_path / "binding.cpp"
    src.write_text("// glue\n#include <kp_lib.h>\n#include <vector>\n\nint twice(int x) { return 2 * kp_scale(x); }\n")
    env = {**os.environ, "KERNELPILOT_PCH": "1", "KERNELPILOT_PCH_DIR": str(tmp_path / "pch"), "CXX": "g++"}
    env.update(pch.compiler_env(env))
    cxx = env["CXX"]
    assert Path(cxx).name == "g++" and env["KERNELPILOT_REAL_CXX"].endswith("g++")

    plain = tmp_path / "plain.o"
    subprocess.run(["g++", "-isystem", str(include), "-fPIC", "-O2", "-c", str(src), "-o", str(plain)], check=True)
    first = _compile(cxx, env, src, tmp_path / "a.o", include)
    assert first.startswith("not used for binding.cpp (not built") and "background" in first
    entries = [d for d in (tmp_path / "pch").iterdir() if d != tmp_path / "pch" / "bin"]
    assert len(entries) == 1
    entry = pch.Entry(entries[0].parent, entries[0].name)
    for _ in range(600):
        if entry.usable()[0] and not entry.building():
            break
        time.sleep(0.1)
    assert entry.usable() == (True, ""), (entry.dir / "build.log").read_text()
    assert entry.header.read_text() == "#include <kp_lib.h>\n#include <vector>\n"
    second = _compile(cxx, env, src, tmp_path / "b.o", include)
    assert second == f"used for binding.cpp (key {entry.key})"
    assert _symbols(tmp_path / "b.o") == _symbols(plain) == _symbols(tmp_path / "a.o")
    # the same preamble in another candidate (another extension name) shares the header
    other = tmp_path / "other.cpp"
    other.write_text(src.read_text().replace("twice", "thrice"))
    assert _compile(cxx, env, other, tmp_path / "c.o", include).startswith("used for other.cpp")
    # a header it was built from changes: not used (the compile reads the headers), rebuilt for next time
    (include / "kp_lib.h").write_text((include / "kp_lib.h").read_text().replace("3 * x", "5 * x"))
    third = _compile(cxx, env, src, tmp_path / "d.o", include)
    assert third.startswith("not used for binding.cpp") and "kp_lib.h changed since it was built" in third


def test_wrapper_passes_everything_else_through(tmp_path: Path) -> None:
    env = {**os.environ, "KERNELPILOT_PCH": "1", "KERNELPILOT_PCH_DIR": str(tmp_path / "pch"), "CXX": "g++"}
    env.update(pch.compiler_env(env))
    version = subprocess.run([env["CXX"], "-dumpversion"], env=env, capture_output=True, text=True, check=True)
    assert version.stdout.strip()[0].isdigit()
    src = tmp_path / "k.cpp"
    src.write_text("int f(int x) { return x + 1; }\n")  # no preamble: a plain compile, nothing said
    out = subprocess.run([env["CXX"], "-c", str(src), "-o", str(tmp_path / "k.o")], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0 and pch.MARKER not in out.stderr
    assert pch.compiler_env({**env, "KERNELPILOT_PCH": "0"}) == {}
    assert pch.compiler_env(env)["KERNELPILOT_REAL_CXX"] == env["KERNELPILOT_REAL_CXX"]  # CXX is the wrapper now
    assert sys.executable in (tmp_path / "pch" / "bin" / "g++").read_text()
