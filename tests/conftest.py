"""Shared test configuration: GPU tests are skipped where no CUDA device is visible."""

from __future__ import annotations

import functools
import os

import pytest

# Precompiled headers (kernelpilot/evaluation/pch.py) are built once per machine in the background,
# hundreds of MB each: the tests' many one-off bindings would each start one. Tests of the mechanism
# turn it on for themselves.
os.environ.setdefault("KERNELPILOT_PCH", "0")


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
