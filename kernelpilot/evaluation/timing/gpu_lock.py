"""One GPU, several processes: who may run work on it while another is timing.

A suite's GPU slot (the evaluation worker) and the baseline service (baseline_service.py: torch.compile
of each problem, and its eager and compiled timings) share a GPU. A timed measurement must have the
GPU to itself; everything else may overlap. So each GPU has a lock file, taken

- **shared** for GPU work that is not timed: verifying and auditing a candidate, torch.compile's first
  run and autotuning of a baseline;
- **exclusive** for timing: a candidate beside eager, or the baselines themselves.

``fcntl.flock`` on a file in the kernelpilot cache (``locks/gpu-<uuid>.lock``), so the kernel releases
the lock of a process that dies, however it dies. ``GpuLock.from_env()`` opens the file named by
``KERNELPILOT_GPU_LOCK`` (the worker opens it at start, before its confinement, and keeps the
descriptor); without the variable every operation is a no-op (``kernelpilot eval``, tests). The
seconds spent waiting are kept (``waited_s``), so a verdict can say where its time went.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "KERNELPILOT_GPU_LOCK"


def lock_path(cache: Path, gpu_key: str) -> Path:
    """The lock file of one GPU (``gpu_key``: its UUID, or its index when no UUID is known)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in gpu_key) or "gpu"
    return cache / "locks" / f"gpu-{safe}.lock"


def gpu_key(index: int | None) -> str:
    """A stable name for the GPU at ``index`` of this process's CUDA_VISIBLE_DEVICES (its UUID via NVML,
    else the index), without initialising CUDA in this process."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    physical = visible[index] if index is not None and index < len(visible) else (
        str(index) if index is not None else (visible[0] if visible else "0"))
    if physical.startswith("GPU-"):
        return physical
    try:
        import pynvml

        pynvml.nvmlInit()
        raw = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(int(physical)))
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    except Exception:  # noqa: BLE001 - no NVML (CPU machines, tests): the index names the GPU
        return f"index{physical}"


class GpuLock:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fd: int | None = None
        self._depth: dict[str, int] = {"shared": 0, "exclusive": 0}
        self.waited_s = 0.0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    @classmethod
    def from_env(cls) -> "GpuLock":
        value = os.environ.get(ENV)
        return cls(Path(value) if value else None)

    @contextmanager
    def _hold(self, mode: str) -> Iterator[None]:
        if self._fd is None:
            yield
            return
        outer = self._depth["exclusive"] or (mode == "shared" and self._depth["shared"])
        if outer:  # already held (exclusive covers shared): nested use changes nothing
            self._depth[mode] += 1
            try:
                yield
            finally:
                self._depth[mode] -= 1
            return
        t0 = time.monotonic()
        if mode == "exclusive" and self._depth["shared"]:
            fcntl.flock(self._fd, fcntl.LOCK_UN)  # flock converts; release first so two upgraders cannot deadlock
        fcntl.flock(self._fd, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH)
        self.waited_s += time.monotonic() - t0
        self._depth[mode] += 1
        try:
            yield
        finally:
            self._depth[mode] -= 1
            if mode == "exclusive" and self._depth["shared"]:
                fcntl.flock(self._fd, fcntl.LOCK_SH)  # back to the shared hold the caller still has
            elif not self._depth["shared"] and not self._depth["exclusive"]:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def shared(self) -> "contextmanager[None]":  # type: ignore[type-arg]
        """GPU work that is not timed (it may overlap other untimed work, never a timing)."""
        return self._hold("shared")

    def exclusive(self) -> "contextmanager[None]":  # type: ignore[type-arg]
        """A timed measurement: nothing else runs on this GPU meanwhile."""
        return self._hold("exclusive")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_current: GpuLock | None = None


def current() -> GpuLock:
    """This process's lock (opened from the environment on first use)."""
    global _current
    if _current is None:
        _current = GpuLock.from_env()
    return _current
