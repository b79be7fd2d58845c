"""Finding and reading the config file: the git root, the nearest ``kernelpilot.toml`` or ``[tool.kernelpilot]``
table of a ``pyproject.toml`` (searched upward from the start directory, stopping at the git root)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from kernelpilot.errors import ConfigError


def find_git_root(start: Path) -> Path | None:
    """The first directory at or above ``start`` holding ``.git`` (a directory or a worktree file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_config_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest config file at or above ``start`` (up to the git root) and its kernelpilot table."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for directory in (start, *start.parents):
        own = directory / "kernelpilot.toml"
        if own.is_file():
            return own, _read_toml(own)
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            data = _read_toml(pyproject)
            table = data.get("tool", {}).get("kernelpilot") if isinstance(data.get("tool"), dict) else None
            if table is not None:
                if not isinstance(table, dict):
                    raise ConfigError(f"[tool.kernelpilot] in {pyproject} must be a table; fix it there.")
                return pyproject, table
        if (directory / ".git").exists():
            break
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix the syntax there.") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({exc.strerror}); check its permissions.") from None
