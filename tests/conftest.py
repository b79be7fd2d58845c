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
    _slow_modules_first(items)
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _slow_modules_first(items: list[pytest.Item]) -> None:
    """Modules holding a test marked ``slow`` run first, each module's tests in their own order.

    pytest-xdist (``-n 2 --dist loadfile`` in pyproject.toml) hands out whole modules in this order as its
    workers come free: the long builds start at once, and the many short modules fill in at the end
    instead of one worker finishing a long module alone."""
    slow = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in slow)  # a stable sort


def pytest_collection_finish(session: pytest.Session) -> None:
    """What is alive once the tests are collected (torch, textual, pytest's own items: hundreds of thousands of
    objects) lives until the end: ``gc.freeze`` takes it out of every later collection. The engine's worker,
    run in-process by many tests, collects garbage after each verdict (worker/main.py ``tidy``); with this heap
    each collection took 0.19 s here, against 0.09 s in a worker process of its own. What a test creates is
    collected as before."""
    import gc

    gc.collect()
    gc.freeze()
