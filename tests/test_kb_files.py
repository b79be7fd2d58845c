"""Which KernelBench commit problem files come from (kernelpilot.kb_files), and the warning a preset gets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelpilot import kb_files


def test_blob_id_is_gits(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_bytes(b"import torch\n\nbatch_size = 16\n")
    assert kb_files.blob_id(f.read_bytes()) == subprocess.run(["git", "hash-object", str(f)], capture_output=True,
                                                               text=True, check=True).stdout.strip()


def test_the_shipped_manifest_knows_three_commits() -> None:
    m = kb_files.manifest()
    assert set(m) == {"current", "v0.1", "original"}
    assert all(sum(k.startswith(f"level{n}/") for k in c["files"]) == (100 if n < 3 else 50)
               for c in m.values() for n in (1, 2, 3))
    # the sizes of level 1 were scaled up between the original files and v0.1's
    assert m["original"]["files"]["level1/23_Softmax"] != m["v0.1"]["files"]["level1/23_Softmax"]
    assert m["v0.1"]["files"]["level1/23_Softmax"] == m["current"]["files"]["level1/23_Softmax"]


@pytest.fixture
def fake_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    files = {}
    for era, text in (("original", "dim = 16384\n"), ("current", "dim = 393216\n")):
        f = tmp_path / era / "level1" / "23_Softmax.py"
        f.parent.mkdir(parents=True)
        f.write_text(text)
        files[era] = f
    oid = {era: kb_files.blob_id(f.read_bytes()) for era, f in files.items()}
    fake = {"current": {"commit": "423217d", "files": {"level1/23_Softmax": oid["current"]}},
            "v0.1": {"commit": "129232e", "files": {"level1/23_Softmax": oid["current"]}},
            "original": {"commit": "6500bbc", "files": {"level1/23_Softmax": oid["original"]}}}
    monkeypatch.setattr(kb_files, "manifest", lambda: fake)
    return files


def test_todays_files_under_v01_name_the_commit_to_check_out(fake_manifest: dict[str, Path]) -> None:
    today = kb_files.check([fake_manifest["current"]], "v0.1")
    assert today["matches"] == {"current": 1, "v0.1": 1}
    assert today["warning"] is None  # v0.1's own branch has these files
    old = kb_files.check([fake_manifest["original"]], "current")
    assert old["matches"] == {"original": 1}
    assert "check out 423217d" in old["warning"]
    assert kb_files.check([fake_manifest["original"]], "v0.1")["warning"] is None
    assert kb_files.check([fake_manifest["original"]], None)["warning"] is None  # our rules: nothing to say


def test_a_changed_file_is_named(fake_manifest: dict[str, Path], tmp_path: Path) -> None:
    changed = tmp_path / "mine" / "level1" / "23_Softmax.py"
    changed.parent.mkdir(parents=True)
    changed.write_text("dim = 1\n")
    out = kb_files.check([changed, tmp_path / "notkb.py"], "current")
    assert out["kernelbench_files"] == 1 and out["unknown"] == ["level1/23_Softmax"]
    assert "none of the 1 problem files" in out["warning"] and "Changed locally: level1/23_Softmax" in out["warning"]


def test_the_report_says_which_files_were_scored() -> None:
    from kernelpilot.suite.report import _kernelbench_lines

    lines = _kernelbench_lines({"kernelbench": [], "problem_files": {
        "kernelbench_files": 250, "matches": {"current": 250, "v0.1": 247}, "unknown_count": 0,
        "warning": "250 of 250 problem files are KernelBench's at current (423217d); check out 6500bbc."}})
    assert lines[0] == "Problem files: 250 KernelBench problems, matching by content: current 250, v0.1 247."
    assert lines[1].startswith("**Warning:** 250 of 250") and "6500bbc" in lines[1]
