"""The code version a suite run records: git's tree of the package (documentation commits do not change it),
uncommitted changes flagged, a digest of the files outside a checkout; real git repositories."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kernelpilot.code_version import code_version, files_digest


def _git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.email=t@example.com", "-c", "user.name=t"]
    return subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "kernelpilot").mkdir(parents=True)
    (repo / "kernelpilot" / "a.py").write_text("A = 1\n")
    (repo / "README.md").write_text("docs\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    return repo


def test_the_package_tree_names_the_code_and_documentation_commits_do_not(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    package = repo / "kernelpilot"
    first = code_version(package)
    assert not first.dirty and len(first.tree) == 40 and first.commit
    (repo / "README.md").write_text("more docs\n")
    _git(repo, "commit", "-qam", "docs only")
    second = code_version(package)
    assert second.tree == first.tree and second.commit != first.commit and not second.dirty
    (package / "a.py").write_text("A = 2\n")
    dirty = code_version(package)
    assert dirty.dirty and dirty.tree == first.tree and dirty.label.endswith("(dirty)")
    _git(repo, "commit", "-qam", "code")
    assert code_version(package).tree != first.tree


def test_outside_a_checkout_the_files_name_the_code(tmp_path: Path) -> None:
    package = tmp_path / "installed" / "kernelpilot"
    shutil.copytree(_repo(tmp_path) / "kernelpilot", package)
    version = code_version(package)
    assert version.tree == files_digest(package) and version.tree.startswith("files:")
    (package / "a.py").write_text("A = 3\n")
    assert code_version(package).tree != version.tree
