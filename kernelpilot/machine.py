"""What this machine offers: how many NVIDIA GPUs are visible (no torch, no CUDA initialisation).

Shared by the command line (which refuses GPU commands up front) and the terminal UI (which falls
back to build-only verdicts and says that the baselines need a GPU).
"""

from __future__ import annotations

import os
import shutil
import subprocess

from kernelpilot.errors import NoGPUError


def gpu_count() -> int:
    """Visible NVIDIA GPUs, via NVML (nvidia-ml-py) or `nvidia-smi -L`; honours CUDA_VISIBLE_DEVICES=''."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "NoDevFiles"):
        return 0
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library: try nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def require_gpu(what: str, alternative: str) -> None:
    if gpu_count() == 0:
        raise NoGPUError(f"{what} needs a CUDA GPU and none is visible (checked NVML and nvidia-smi); run it on a "
                         f"machine with an NVIDIA GPU and driver, or {alternative}.")
