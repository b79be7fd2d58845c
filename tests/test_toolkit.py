"""Finding the CUDA toolkit behind wrapper scripts, picking the architecture, the build environment."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kernelpilot.errors import ToolchainError
from kernelpilot.toolkit import (
    arch_capability,
    detect_arch,
    find_cuda_home,
    gencode_flags,
    is_cuda_home,
    normalize_arch,
    toolchain_env,
)


@pytest.fixture(scope="module")
def real_home() -> Path:
    try:
        home = find_cuda_home()
    except ToolchainError:
        pytest.skip("no CUDA toolkit on this machine")
    return home


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_wrapper_script_on_path_leads_to_the_real_install(tmp_path: Path, real_home: Path) -> None:
    _script(tmp_path / "bin" / "nvcc", f'#!/bin/sh\nexec {real_home}/bin/nvcc "$@"\n')
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    assert find_cuda_home(env, default_homes=()) == real_home


def test_opaque_wrapper_is_resolved_by_asking_nvcc(tmp_path: Path, real_home: Path) -> None:
    # No literal path to nvcc in the script: only nvcc's dry run can tell where it lives.
    _script(tmp_path / "bin" / "nvcc", f'#!/bin/sh\nD={real_home}\nexec "$D/bin/nv""cc" "$@"\n')
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    assert find_cuda_home(env, default_homes=()) == real_home


def test_symlinked_nvcc_resolves_to_its_toolkit(tmp_path: Path, real_home: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(real_home / "bin" / "nvcc")
    env = {"PATH": str(tmp_path / "bin")}
    assert find_cuda_home(env, default_homes=()) == real_home


def test_cuda_home_wins_when_it_is_a_toolkit(real_home: Path) -> None:
    assert find_cuda_home({"CUDA_HOME": str(real_home), "PATH": ""}, default_homes=()) == real_home


def test_bogus_cuda_home_falls_through_to_the_default_location(tmp_path: Path, real_home: Path) -> None:
    # /usr/local is what torch guesses from a wrapper in /usr/local/bin: bin/nvcc but no headers.
    fake = tmp_path / "local"
    _script(fake / "bin" / "nvcc", "#!/bin/sh\nexit 1\n")
    env = {"CUDA_HOME": str(fake), "PATH": ""}
    assert find_cuda_home(env, default_homes=(real_home,)) == real_home


def test_bogus_cuda_home_then_wrapper_on_path(tmp_path: Path, real_home: Path) -> None:
    _script(tmp_path / "bin" / "nvcc", f'#!/bin/bash\nexec "{real_home}/bin/nvcc" "$@"\n')
    env = {"CUDA_HOME": str(tmp_path / "nowhere"), "PATH": str(tmp_path / "bin")}
    assert find_cuda_home(env, default_homes=(tmp_path / "also-nowhere",)) == real_home


def test_nothing_found_names_what_was_tried(tmp_path: Path) -> None:
    env = {"CUDA_HOME": str(tmp_path / "missing"), "PATH": str(tmp_path)}
    with pytest.raises(ToolchainError) as info:
        find_cuda_home(env, default_homes=(tmp_path / "cuda",))
    message = str(info.value)
    assert f"$CUDA_HOME={tmp_path / 'missing'}" in message
    assert str(tmp_path / "cuda") in message
    assert "nvcc on PATH (not found)" in message
    assert "set CUDA_HOME" in message
    assert "\n" not in message


def test_broken_wrapper_on_path_is_reported(tmp_path: Path) -> None:
    _script(tmp_path / "bin" / "nvcc", "#!/bin/sh\nexit 3\n")
    with pytest.raises(ToolchainError, match="could not tell which toolkit"):
        find_cuda_home({"PATH": str(tmp_path / "bin")}, default_homes=())


def test_is_cuda_home_needs_nvcc_and_headers(tmp_path: Path, real_home: Path) -> None:
    assert is_cuda_home(real_home)
    _script(tmp_path / "bin" / "nvcc", "#!/bin/sh\n")
    assert not is_cuda_home(tmp_path)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda_runtime.h").write_text("")
    assert is_cuda_home(tmp_path)


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [("sm_90", "sm_90"), ("90", "sm_90"), ("9.0", "sm_90"), ("sm_90a", "sm_90a"), ("9.0a", "sm_90a"),
     ("compute_80", "sm_80"), ("SM_100A", "sm_100a"), ("12.0", "sm_120")],
)
def test_normalize_arch(spelling: str, expected: str) -> None:
    assert normalize_arch(spelling) == expected


def test_unknown_arch_is_a_toolchain_error() -> None:
    with pytest.raises(ToolchainError, match="KERNELPILOT_ARCH"):
        normalize_arch("hopper")


def test_arch_spellings_for_torch_and_nvcc() -> None:
    assert arch_capability("sm_90") == "9.0"
    assert arch_capability("sm_90a") == "9.0a"
    assert arch_capability("sm_100a") == "10.0a"
    assert gencode_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]


def test_detect_arch_env_override_and_fallback() -> None:
    assert detect_arch({"KERNELPILOT_ARCH": "9.0a"}) == "sm_90a"
    assert detect_arch({"KERNELPILOT_ARCH": "sm_80"}, arch_specific=True) == "sm_80"
    # CUDA_VISIBLE_DEVICES=-1 hides every GPU: the Hopper default applies.
    assert detect_arch({"CUDA_VISIBLE_DEVICES": "-1"}) == "sm_90"
    assert detect_arch({"CUDA_VISIBLE_DEVICES": "-1"}, arch_specific=True) == "sm_90a"


def test_detect_arch_matches_the_visible_gpu() -> None:
    arch = detect_arch({})
    assert arch.startswith("sm_") and not arch.endswith("a")


def test_toolchain_env_puts_the_real_bin_first(real_home: Path) -> None:
    env = {"PATH": "/usr/local/bin:/usr/bin", "CUDA_HOME": str(real_home)}
    extra = toolchain_env("sm_90a", env)
    assert extra["CUDA_HOME"] == str(real_home)
    assert extra["PATH"].split(os.pathsep)[:2] == [str(real_home / "bin"), "/usr/local/bin"]
    assert extra["TORCH_CUDA_ARCH_LIST"] == "9.0a"
    assert int(extra["MAX_JOBS"]) >= 1
    assert toolchain_env("sm_90", {**env, "MAX_JOBS": "3"})["MAX_JOBS"] == "3"
