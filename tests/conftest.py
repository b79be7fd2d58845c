"""Shared test configuration: GPU tests are skipped where no CUDA device is visible."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

# Precompiled headers (kernelpilot/evaluation/build/pch.py) are built once per machine in the background,
# hundreds of MB each: the tests' many one-off bindings would each start one. Tests of the mechanism
# turn it on for themselves.
os.environ.setdefault("KERNELPILOT_PCH", "0")


@pytest.fixture(autouse=True)
def _machine_baselines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's cache of baselines (machine_baselines.py) is the test's own: a test never shows the
    user's cached figures, nor leaves its own in the user's cache."""
    monkeypatch.setenv("KERNELPILOT_BASELINES_CACHE", str(tmp_path / "machine-baselines.sqlite"))


@functools.cache
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
