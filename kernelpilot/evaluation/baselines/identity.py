"""What a stored baseline is keyed on and measured with: the request's key (the problem's bytes and the settings
that change what a baseline measures), and this GPU's identity (UUID, driver, torch, Triton, CUDA, clocks), read
without importing torch or initialising CUDA here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpilot.evaluation.baselines.values import software_versions
from kernelpilot.evaluation.timing.gpu_lock import gpu_key

if TYPE_CHECKING:
    from kernelpilot.evaluation.settings import EvalSettings

# settings that change what a baseline measures (a stored baseline is reused only where they are equal)
TIMING_FIELDS = ("compile_mode", "compile_baseline", "cuda_graphs", "seed", "warmup", "rounds", "samples_per_round",
                 "time_budget_s", "input_pool", "flush_bytes")



def request_key(problem: Path, settings: EvalSettings | Mapping[str, Any]) -> str:
    """The problem's exact bytes and the settings that change what its baselines measure."""
    digest = hashlib.sha256(Path(problem).read_bytes())
    values = settings.to_dict() if hasattr(settings, "to_dict") else dict(settings)
    digest.update(json.dumps({k: values.get(k) for k in TIMING_FIELDS}, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:24]



def nvml_facts(uuid: str = "", index: int = 0) -> tuple[str, dict[str, int]]:
    """(driver version, clocks) from NVML of the GPU with ``uuid`` (else at ``index``): the maximum and application
    clocks, not the momentary ones; ("", {}) where NVML is missing, and no clock a GPU does not report."""
    clocks: dict[str, int] = {}
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}") if uuid \
            else pynvml.nvmlDeviceGetHandleByIndex(index)
        raw = pynvml.nvmlSystemGetDriverVersion()
        driver = raw.decode() if isinstance(raw, bytes) else str(raw)
    except Exception:  # noqa: BLE001 - no NVML: the UUID and torch still identify the setting
        return "", clocks
    for label, get, kind in (("sm_max_mhz", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
                             ("mem_max_mhz", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM),
                             ("sm_app_mhz", pynvml.nvmlDeviceGetApplicationsClock, pynvml.NVML_CLOCK_SM),
                             ("mem_app_mhz", pynvml.nvmlDeviceGetApplicationsClock, pynvml.NVML_CLOCK_MEM)):
        try:
            clocks[label] = int(get(handle, kind))
        except Exception:  # noqa: BLE001 - a clock this GPU does not report
            pass
    return driver, clocks


def current_identity(gpu: int | None) -> dict[str, Any]:
    """This machine's GPU at ``gpu`` as a stored baseline names it (UUID, driver, torch, Triton, torch's
    CUDA, clocks), read without importing torch or initialising CUDA here; empty fields where NVML is missing."""
    from importlib.metadata import PackageNotFoundError, version

    identity: dict[str, Any] = {"gpu_uuid": "", "driver": "", "torch": "", "clocks": {}}
    identity["triton"], identity["cuda"] = software_versions()
    try:
        identity["torch"] = version("torch")
    except PackageNotFoundError:
        pass
    try:
        uuid = gpu_key(gpu)
    except Exception:  # noqa: BLE001 - no NVML: the stored baseline's torch is still compared
        return identity
    identity["driver"], identity["clocks"] = nvml_facts(uuid)
    if identity["driver"]:
        identity["gpu_uuid"] = uuid[4:] if uuid.startswith("GPU-") else uuid
    return identity


def identity_mismatch(stored: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between a stored baseline's identity and this GPU's ("" when it may be reused)."""
    torch_now = str(now.get("torch", "")).split("+")[0]
    torch_then = str(stored.get("torch", "")).split("+")[0]
    diffs = []
    if stored.get("gpu_uuid") and now.get("gpu_uuid") and str(stored["gpu_uuid"]).removeprefix("GPU-") != str(
            now["gpu_uuid"]).removeprefix("GPU-"):
        diffs.append("another GPU")
    if stored.get("driver") != now.get("driver") and now.get("driver"):
        diffs.append(f"driver {stored.get('driver') or '?'} -> {now.get('driver')}")
    if torch_now and torch_then != torch_now:
        diffs.append(f"torch {torch_then or '?'} -> {torch_now}")
    for name, label in (("triton", "Triton"), ("cuda", "CUDA")):  # unrecorded in older rows: not a difference
        then, now_value = str(stored.get(name) or ""), str(now.get(name) or "")
        if then and now_value and then != now_value:
            diffs.append(f"{label} {then} -> {now_value}")
    then_clocks, now_clocks = stored.get("clocks") or {}, now.get("clocks") or {}
    moved = [k for k in now_clocks if k in then_clocks and then_clocks[k] != now_clocks[k]]
    if moved:
        diffs.append("clocks " + ", ".join(f"{k} {then_clocks[k]} -> {now_clocks[k]}" for k in moved))
    return "; ".join(diffs)
