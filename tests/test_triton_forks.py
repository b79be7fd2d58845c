"""An autotuned Triton kernel's configs compiled at once in forked builders (triton_child.compile_configs): each
config is still compiled in the builder itself, in order (there from Triton's cache when its fork finished), a
fork's failure or hang leaves its config to the builder, and no fork outlives the call."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernelpilot.evaluation.build import triton_child
from kernelpilot.evaluation.build.triton_child import compile_configs


@pytest.fixture(autouse=True)
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the forks compile_configs made (only those are looked at: other tests' children are theirs)."""
    made: list[int] = []
    real = triton_child._fork

    def recording(*args: object) -> list[int]:
        pids = real(*args)  # type: ignore[arg-type]
        made.extend(pids)
        return pids

    monkeypatch.setattr(triton_child, "_fork", recording)
    return made


def _reaped(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


def _marking(folder: Path, fail_in_fork: str = "", hang_in_fork: str = "", fail: str = ""):
    """compile_one for configs named by strings: writes ``<config>.<pid>`` (the fork's files are its kernels)."""
    parent = os.getpid()

    def compile_one(config: str) -> None:
        forked = os.getpid() != parent
        if forked and config == hang_in_fork:
            time.sleep(600)
        if config == fail or (forked and config == fail_in_fork):
            raise RuntimeError(f"{config} does not compile")
        (folder / f"{config}.{os.getpid()}").write_text("cubin")

    return compile_one


def _where(folder: Path, config: str) -> set[str]:
    return {"parent" if p.suffix == f".{os.getpid()}" else "fork" for p in folder.glob(f"{config}.*")}


def test_the_configs_after_the_first_compile_in_forks_and_again_here_in_order(tmp_path: Path,
                                                                              forks: list[int]) -> None:
    forked = compile_configs(_marking(tmp_path), ["a", "b", "c"])
    assert forked == min(2, triton_child.MAX_FORKS)
    assert len(forks) == forked and _reaped(forks)
    assert _where(tmp_path, "a") == {"parent"}  # the first: here, while the forks compile the others
    for config in ("b", "c")[:forked]:
        assert _where(tmp_path, config) == {"fork", "parent"}  # there from the cache: Triton loads it here


def test_one_config_forks_nothing(tmp_path: Path, forks: list[int]) -> None:
    assert compile_configs(_marking(tmp_path), ["a"]) == 0
    assert _where(tmp_path, "a") == {"parent"} and forks == []


def test_a_config_that_fails_in_its_fork_is_compiled_here(tmp_path: Path, forks: list[int]) -> None:
    assert compile_configs(_marking(tmp_path, fail_in_fork="b"), ["a", "b"]) == 0
    assert len(forks) == 1 and _where(tmp_path, "b") == {"parent"} and _reaped(forks)


def test_a_compile_error_is_raised_here_and_no_fork_outlives_it(tmp_path: Path, forks: list[int]) -> None:
    with pytest.raises(RuntimeError, match="a does not compile"):
        compile_configs(_marking(tmp_path, hang_in_fork="b", fail="a"), ["a", "b"])
    assert len(forks) == 1 and _reaped(forks)


def test_a_fork_that_hangs_is_killed_and_its_config_compiled_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   forks: list[int]) -> None:
    monkeypatch.setattr(triton_child, "FORK_PATIENCE", 1.0)
    monkeypatch.setattr(triton_child, "FORK_GRACE_S", 0.2)
    started = time.monotonic()
    assert compile_configs(_marking(tmp_path, hang_in_fork="b"), ["a", "b"]) == 0
    assert time.monotonic() - started < 30
    assert len(forks) == 1 and _where(tmp_path, "b") == {"parent"} and _reaped(forks)


def test_without_fork_every_config_compiles_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  forks: list[int]) -> None:
    def refused() -> int:
        raise PermissionError("fork refused")

    monkeypatch.setattr(triton_child.os, "fork", refused)
    assert compile_configs(_marking(tmp_path), ["a", "b", "c"]) == 0
    assert all(_where(tmp_path, c) == {"parent"} for c in "abc") and forks == []
