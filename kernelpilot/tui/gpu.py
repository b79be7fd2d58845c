"""Live GPU state for the status bar, read with nvidia-ml-py (pynvml) in a thread worker.

The app polls a ``GpuSource`` every two seconds; tests and snapshots inject a fixed source so the
screen does not depend on the machine.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class GpuReading:
    name: str
    util_pct: int
    mem_used_mib: int
    mem_total_mib: int
    sm_clock_mhz: int
    temperature_c: int

    def describe(self) -> str:
        return (
            f"{self.name} {self.util_pct}% · {self.mem_used_mib / 1024:.1f}/"
            f"{self.mem_total_mib / 1024:.0f} GiB · {self.sm_clock_mhz} MHz · {self.temperature_c}°C"
        )


class GpuSource(Protocol):
    def read(self) -> GpuReading | None:
        """The current state of the first GPU, or None when there is no GPU."""

    def close(self) -> None: ...


class NvmlGpuSource:
    """Reads device 0 through NVML; answers None when NVML or a GPU is missing."""

    def __init__(self, index: int = 0) -> None:
        self._index = index
        self._lock = threading.Lock()
        self._handle: object | None = None
        self._failed = False

    def _init(self) -> object | None:
        if self._handle is not None or self._failed:
            return self._handle
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self._index)
        except Exception:  # no driver, no device, no library: "no GPU"
            self._failed = True
            self._handle = None
        return self._handle

    def read(self) -> GpuReading | None:
        with self._lock:
            handle = self._init()
            if handle is None:
                return None
            try:
                import pynvml

                name = pynvml.nvmlDeviceGetName(handle)
                if isinstance(name, bytes):
                    name = name.decode()
                util = pynvml.nvmlDeviceGetUtilizationRates(handle)
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                temp = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
            except Exception:
                return None
            return GpuReading(
                name=str(name).replace("NVIDIA ", ""),
                util_pct=int(util.gpu),
                mem_used_mib=int(mem.used) // (1024 * 1024),
                mem_total_mib=int(mem.total) // (1024 * 1024),
                sm_clock_mhz=int(clock),
                temperature_c=int(temp),
            )

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                try:
                    import pynvml

                    pynvml.nvmlShutdown()
                except Exception:
                    pass
                self._handle = None


class FixedGpuSource:
    """Always the same reading (or always "no GPU"): for tests and snapshots."""

    def __init__(self, reading: GpuReading | None) -> None:
        self.reading = reading

    def read(self) -> GpuReading | None:
        return self.reading

    def close(self) -> None:
        pass
