"""ruff in CI: `ruff check kernelpilot tests` with the project's configuration (pyproject.toml: pyflakes, pycodestyle,
lines within 120 columns). No file is allowed past 120 columns any more: pyproject.toml must not bring back a
per-file exemption from E501."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]' installs it (the lint is part of the tests)")
    return [found]


def test_the_package_and_tests_pass_ruff() -> None:
    proc = subprocess.run([*_ruff(), "check", "kernelpilot", "tests", "--output-format", "concise"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-1000:]


def test_no_file_is_exempt_from_the_line_length() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lint = config["tool"]["ruff"].get("lint", {})
    exempt = sorted(f for f, rules in lint.get("per-file-ignores", {}).items() if "E501" in rules)
    assert not exempt, f"{exempt} may not go past 120 columns: wrap the lines instead (pyproject.toml)"
    assert "E501" not in lint.get("ignore", []) and "E501" not in config["tool"]["ruff"].get("ignore", [])
