"""The linker is chosen by linking with it, once per toolchain identity (issue 49: gold on PATH that could not
link made every native build fail on the GPU image)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kernelpilot import toolchain_probe as tp

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _wrapper(tmp_path: Path, *, refuse_gold: bool) -> tuple[Path, Path]:
    """A ``g++`` that logs each call and, with ``refuse_gold``, fails any link with -fuse-ld=gold as the GPU
    image's gold did."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    script = bin_dir / "g++"
    refuse = ('case " $* " in *" -fuse-ld=gold "*) echo "ld: cannot open /opt/gcc/lib/libstdc++.so: '
              'No such file or directory" >&2; exit 1;; esac\n') if refuse_gold else ""
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\n{refuse}exec {shutil.which("g++")} "$@"\n')
    script.chmod(0o755)
    return script, log


def _env(tmp_path: Path, cxx: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "CXX": str(cxx),
            "KERNELPILOT_TOOLCHAIN_CACHE": str(tmp_path / "toolchain.json")}


def test_a_linker_that_fails_its_probe_is_never_used(tmp_path: Path) -> None:
    cxx, _ = _wrapper(tmp_path, refuse_gold=True)
    env = _env(tmp_path, cxx)
    answer = tp.choices(env)
    gold = next(p for p in answer.probes if p.name == "gold")
    assert not gold.ok and "cannot open" in gold.error
    assert answer.linker == "default" and tp.linker_flags(env) == []
    assert next(p for p in answer.probes if p.name == "default").ok


def test_the_answer_is_cached_per_identity_and_probed_again_when_the_compiler_changes(tmp_path: Path) -> None:
    cxx, log = _wrapper(tmp_path, refuse_gold=False)
    env = _env(tmp_path, cxx)
    first = tp.choices(env)
    calls = log.read_text().count("\n")
    assert calls >= 2  # compiled the probe object, linked at least once
    assert tp.choices(env) == first and log.read_text().count("\n") == calls  # cached: nothing ran
    chosen = next(p for p in first.probes if p.name == first.linker)
    assert chosen.ok and first.linker_flags == list(tp.LINKERS[first.linker])

    cxx, _ = _wrapper(tmp_path, refuse_gold=True)  # the same path, a new compiler (size and mtime differ)
    os.utime(cxx, ns=(1, 1))
    again = tp.choices(env)
    assert again.identity != first.identity and again.linker == "default"
    assert log.read_text().count("\n") > calls


def test_default_asked_for_skips_the_probe(tmp_path: Path) -> None:
    cxx, log = _wrapper(tmp_path, refuse_gold=False)
    env = {**_env(tmp_path, cxx), "KERNELPILOT_LINKER": "default"}
    assert tp.linker_flags(env) == []
    assert not log.exists()


def test_the_wheel_headers_never_shadow_the_toolkit_s(tmp_path: Path) -> None:
    """CPATH once put the torch wheel's copy of cuda_runtime.h ahead of the toolkit's: the overlay on CPATH
    links only the headers the toolkit lacks."""
    from kernelpilot.toolkit import header_overlay

    home, wheel = tmp_path / "cuda", tmp_path / "wheel" / "include"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda_runtime.h").write_text("// toolkit\n")
    (wheel / "sub").mkdir(parents=True)
    for name in ("cuda_runtime.h", "cublasLt.h", "sub/extra.h"):
        (wheel / name).write_text(f"// wheel {name}\n")
    overlay = header_overlay(home, [wheel], {"KERNELPILOT_HEADER_OVERLAY_DIR": str(tmp_path / "overlay")})
    assert overlay is not None
    files = sorted(str(p.relative_to(overlay)) for p in overlay.rglob("*") if p.is_file() and p.name != ".complete")
    assert files == ["cublasLt.h", "sub/extra.h"]
    assert (overlay / "cublasLt.h").read_text() == "// wheel cublasLt.h\n"


def test_an_nvcc_option_this_nvcc_refuses_is_left_out(tmp_path: Path) -> None:
    """An older nvcc rejects -static-global-template-stub (nvcc 12.8 added it): builds then go without it."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "include").mkdir()
    (home / "include" / "cuda_runtime.h").write_text("")
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text('#!/bin/sh\ncase " $* " in *static-global-template-stub*) '
                    'echo "nvcc fatal   : Unknown option \'-static-global-template-stub\'" >&2; exit 1;; '
                    'esac\nexit 0\n')
    nvcc.chmod(0o755)
    cxx, _ = _wrapper(tmp_path, refuse_gold=False)
    env = {**_env(tmp_path, cxx), "CUDA_HOME": str(home)}
    answer = tp.choices(env)
    assert answer.nvcc_flags == ["-t0"] and tp.nvcc_flags(env) == ["-t0"]
    assert "Unknown option" in answer.nvcc_refused["-static-global-template-stub=false"]


def test_a_handed_answer_is_used_without_reading_or_probing_and_only_for_its_identity(tmp_path: Path) -> None:
    cxx, log = _wrapper(tmp_path, refuse_gold=False)
    env = _env(tmp_path, cxx)
    carried = tp.handed(env)  # the build step's answer (probed here once), as the evaluation worker gets it
    calls = log.read_text().count("\n")
    worker = {**env, tp.HANDED: carried, "KERNELPILOT_TOOLCHAIN_CACHE": str(tmp_path / "unreadable" / "x.json")}
    assert tp.choices(worker).identity == tp.identity(env) and log.read_text().count("\n") == calls  # nothing ran
    assert not (tmp_path / "unreadable").exists()
    # handed for another toolchain (a new compiler at the same path): probed, never taken
    os.utime(cxx, ns=(1, 1))
    again = tp.choices(worker)
    assert again.identity != tp.ToolchainChoices.from_dict(json.loads(carried)).identity
    assert log.read_text().count("\n") > calls
