from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Transcripts and worktrees go to the test's tmp dir, never the user's data dir."""
    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KERNELPILOT_MODEL", raising=False)
