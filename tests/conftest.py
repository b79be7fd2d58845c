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


@pytest.fixture(scope="module", autouse=True)
def _earlier_objects_frozen() -> None:
    """Before each module, what is still alive (torch, textual, pytest's items, modules earlier tests imported:
    a million objects late in a run) leaves the garbage collector's generations (``gc.freeze``).

    Many tests run the engine's Worker in the pytest process; it collects garbage after each verdict
    (worker/main.py ``tidy``, ``memory.release``), and each collection scanned that whole heap: 0.2 s and
    more a call, 12 of the 20 s of tests/test_reference_cache.py. The garbage is collected first, so only
    live objects are frozen; whatever a module's tests create is collected as before."""
    import gc

    gc.collect()
    gc.freeze()
