"""kernelpilot's own bytecode cache (evaluation/sandbox/bytecode.py) for installations of torch without one: when it
is needed, that a real process writes it and a later process reads it without writing, that sandboxes may read it
and never write it, and doctor's row."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.evaluation.sandbox import bytecode


def _fake_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, with_pyc: bool) -> Path:
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    init = package / "__init__.py"
    init.write_text("x = 1\n")
    if with_pyc:
        import py_compile

        py_compile.compile(str(init), cfile=str(package / "__pycache__" / Path(
            importlib.util.cache_from_source(str(init))).name))
    spec = importlib.machinery.ModuleSpec("torch", None, origin=str(init))
    monkeypatch.setattr(bytecode.importlib.util, "find_spec", lambda name: spec if name == "torch" else None)
    return package


def test_needed_only_where_torch_has_no_bytecode_and_none_may_be_written(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch(tmp_path, monkeypatch, with_pyc=False)
    assert bytecode.needed({"PYTHONDONTWRITEBYTECODE": "1"})
    assert not bytecode.needed({})  # its folder is writable: Python writes the bytecode itself on first import
    monkeypatch.setattr(bytecode, "ready", lambda where=None: True)
    assert bytecode.env_for({}) == {}  # not needed: a prefix would hide the installation's __pycache__ folders


def test_not_needed_where_the_installation_has_its_bytecode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch(tmp_path, monkeypatch, with_pyc=True)
    assert not bytecode.needed({"PYTHONDONTWRITEBYTECODE": "1"})
    assert bytecode.write_soon(tmp_path / "cache") is None


def test_a_written_cache_is_read_by_a_later_process_that_writes_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    where = tmp_path / "pycache"
    monkeypatch.setattr(bytecode, "MODULES", ("json", "kernelpilot.evaluation.sandbox.bytecode"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as on the image: the writer must not inherit it
    seconds = bytecode.write(where)
    assert seconds > 0 and bytecode.ready(where)
    stamp = json.loads((where / bytecode.STAMP).read_text())
    assert stamp["torch"] == bytecode._torch_version() and stamp["modules"] == list(bytecode.MODULES)
    source = Path(bytecode.__file__).resolve()
    cached = where / source.parent.relative_to(source.anchor) / f"bytecode.{sys.implementation.cache_tag}.pyc"
    assert cached.is_file()  # the prefix mirrors the source's path
    before = {p: p.stat().st_mtime_ns for p in where.rglob("*.pyc")}
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    probe = ("import kernelpilot.evaluation.sandbox.bytecode as b, colorsys; "
             "print(b.__spec__.cached); print(colorsys.__spec__.cached)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.split()
    assert Path(out[0]) == cached  # read from the cache
    assert {p: p.stat().st_mtime_ns for p in where.rglob("*.pyc")} == before  # and nothing written there
    assert not Path(out[1]).exists()  # colorsys was never imported by the writer: compiled in memory, not cached


def test_a_stamp_of_another_torch_is_not_ready(tmp_path: Path) -> None:
    (tmp_path / bytecode.STAMP).write_text(json.dumps({"torch": "0.0.1"}))
    assert not bytecode.ready(tmp_path)
    (tmp_path / bytecode.STAMP).write_text("not json")
    assert not bytecode.ready(tmp_path)


def test_a_failed_writer_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bytecode, "MODULES", ("no_such_module_kp",))
    with pytest.raises(RuntimeError, match="no_such_module_kp"):
        bytecode.write(tmp_path)
    assert not bytecode.ready(tmp_path)


def test_sandboxes_read_the_cache_and_never_write_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.evaluation.sandbox.confine import WorkerSandbox
    from kernelpilot.evaluation.sandbox.environment import toolchain_read_paths

    where = tmp_path / "cache" / "kernelpilot" / "pycache" / "tag"
    where.mkdir(parents=True)
    monkeypatch.setattr(bytecode, "folder", lambda: where)
    monkeypatch.setattr(bytecode, "needed", lambda env=None: True)
    monkeypatch.setattr(bytecode, "ready", lambda where=None: True)
    assert bytecode.env_for() == {"PYTHONPYCACHEPREFIX": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    assert where.resolve() in toolchain_read_paths(home=tmp_path / "home")
    box = WorkerSandbox(writable=[tmp_path / "work"], private_tmp=tmp_path / "private")
    assert where.resolve() in box.readable
    assert not any(where.resolve().is_relative_to(w) for w in box.writable)


def test_doctor_says_where_the_cache_could_not_be_written(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot import doctor

    monkeypatch.setattr(bytecode, "needed", lambda env=None: False)
    assert doctor.check_bytecode().status == doctor.OK
    monkeypatch.setattr(bytecode, "needed", lambda env=None: True)
    monkeypatch.setattr(bytecode, "ready", lambda where=None: False)

    def fail(where: Path | None = None, timeout_s: float = 0) -> float:
        raise RuntimeError("the bytecode cache was not written: ImportError: x")

    monkeypatch.setattr(bytecode, "write", fail)
    check = doctor.check_bytecode()
    assert check.status == doctor.WARN and not check.essential and "PYTHONDONTWRITEBYTECODE" in check.fix
    monkeypatch.setattr(bytecode, "write", lambda where=None, timeout_s=0: 7.5)
    check = doctor.check_bytecode()
    assert check.status == doctor.OK and "written now (7.5 s)" in check.detail
