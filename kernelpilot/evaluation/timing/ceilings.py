"""Measured ceilings of this GPU: copy bandwidth and dense matmul throughput (worker side).

Measured once per GPU and driver and cached as JSON in ``<user cache>/kernelpilot/ceilings/``:

- ``copy_tbps``: a 1 GiB device-to-device ``copy_``, read + write bytes over the median time;
- ``tflops["bfloat16"]`` (also used for float16): an 8192^3 bf16 ``torch.mm``;
- ``tflops["float32"]``: fp32 ``torch.mm`` with TF32 off (what an fp32-exact kernel can reach), the best of
  4096^3 and 8192^3: one size alone reads low, and cuBLAS beat the 4096^3 figure by up to 11% on KernelBench's
  level-1 matmuls (H200, 2026-12-02), which the verdict then called "111% of speed of light";
- ``tflops["tf32"]``: an 8192^3 fp32 ``torch.mm`` with TF32 on: the rate of fp32 work that runs on tensor
  cores, as cuDNN's fp32 convolutions do under torch's default ``cudnn.allow_tf32 = True``.

Each is the median of 20 CUDA-event timed calls after 5 warm-ups, each call queued behind a GPU spin
so that launch overhead is excluded, as in the candidates' timings. The file records GPU name, driver,
SM and memory clocks (NVML, when available), torch version and the date.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

# 2: calls timed behind a GPU spin (launch overhead excluded, as candidates are timed); version 1
#    included it and read 2-4% low, so kernels showed "101% of ceiling"
# 3: fp32 the best of two sizes, and a TF32 rate (fp32 convolutions were held to the fp32 SIMT rate and
#    showed 190-450% of speed of light)
CACHE_VERSION = 3

# operators whose flops run on tensor cores in TF32 when the problem's dtype is float32 and torch's switch
# for them is on: convolutions (torch.backends.cudnn.allow_tf32, on by default) and matmuls
# (torch.backends.cuda.matmul.allow_tf32, off by default). Names as torch's FlopCounterMode keys them.
_MATMUL_OPS = frozenset("mm addmm bmm baddbmm matmul linear _scaled_mm".split())


@dataclass
class Ceilings:
    gpu: str
    driver: str
    copy_tbps: float
    tflops: dict[str, float] = field(default_factory=dict)
    clocks: dict[str, int] = field(default_factory=dict)
    torch: str = ""
    measured_at: str = ""
    version: int = CACHE_VERSION

    def flops_rate(self, dtype: str) -> float | None:
        """TFLOP/s for a dtype name ("bfloat16", "float32", ...)."""
        if dtype in self.tflops:
            return self.tflops[dtype]
        if dtype == "float16":
            return self.tflops.get("bfloat16")
        return None

    def compute_rate(self, dtype: str, flops_by_op: dict[str, int] | None = None, *, conv_tf32: bool = False,
                     matmul_tf32: bool = False) -> tuple[float | None, str]:
        """(TFLOP/s, what it assumes) for a problem's flops: each operator's flops at the rate its math runs
        at, combined as time (total / sum of flops_i / rate_i). For float32, convolutions count at the TF32
        rate when ``conv_tf32`` (cuDNN's default) and matmuls when ``matmul_tf32``; everything else at the
        dtype's own rate. A cache from before the TF32 figure (no "tf32") counts everything at fp32."""
        base = self.flops_rate(dtype)
        if base is None or dtype != "float32" or not flops_by_op or "tf32" not in self.tflops:
            return base, ""
        tf32 = self.tflops["tf32"]
        seconds, total, on_tc = 0.0, 0, []
        for op, n in flops_by_op.items():
            name = op.split(".")[-1]
            fast = (conv_tf32 and "conv" in name) or (matmul_tf32 and name in _MATMUL_OPS)
            if fast and n:
                on_tc.append(name)
            seconds += n / ((tf32 if fast else base) * 1e12)
            total += n
        if not on_tc or seconds <= 0:
            return base, ""
        return total / seconds / 1e12, f"TF32 for {', '.join(sorted(set(on_tc)))} (torch's TF32 switch for it is on)"

    def source(self) -> str:
        return f"measured {self.measured_at[:10]} on {self.gpu}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Ceilings":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def cache_dir() -> Path:
    """$KERNELPILOT_CEILINGS_DIR (set by the caller for its sandboxed worker), else the user cache."""
    import os

    if os.environ.get("KERNELPILOT_CEILINGS_DIR"):
        return Path(os.environ["KERNELPILOT_CEILINGS_DIR"])
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "ceilings"


def cache_path(gpu: str, driver: str, base: Path | None = None) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", f"{gpu}-{driver}").strip("-")
    return (base or cache_dir()) / f"{slug}.json"


def load_cached(gpu: str, driver: str, base: Path | None = None) -> Ceilings | None:
    path = cache_path(gpu, driver, base)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        ceilings = Ceilings.from_dict(data)
    except (OSError, ValueError, TypeError):
        return None
    if ceilings.version != CACHE_VERSION or ceilings.gpu != gpu or ceilings.driver != driver:
        return None
    return ceilings


def save(ceilings: Ceilings, base: Path | None = None) -> Path:
    path = cache_path(ceilings.gpu, ceilings.driver, base)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(ceilings), indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def gpu_identity(device_index: int = 0) -> tuple[str, str, dict[str, int]]:
    """(name, driver version, clocks) from NVML, falling back to torch for the name."""
    name, driver, clocks = "", "", {}
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        raw = pynvml.nvmlDeviceGetName(handle)
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        drv = pynvml.nvmlSystemGetDriverVersion()
        driver = drv.decode() if isinstance(drv, bytes) else str(drv)
        for label, kind in (("sm_max_mhz", pynvml.NVML_CLOCK_SM), ("mem_max_mhz", pynvml.NVML_CLOCK_MEM)):
            try:
                clocks[label] = int(pynvml.nvmlDeviceGetMaxClockInfo(handle, kind))
            except Exception:
                pass
        for label, kind in (("sm_mhz", pynvml.NVML_CLOCK_SM), ("mem_mhz", pynvml.NVML_CLOCK_MEM)):
            try:
                clocks[label] = int(pynvml.nvmlDeviceGetClockInfo(handle, kind))
            except Exception:
                pass
    except Exception:
        pass
    if not name:
        import torch

        name = torch.cuda.get_device_name(device_index)
    return name, driver or "unknown", clocks


def _median_ms(fn: Callable[[], Any], reps: int = 20, warmup: int = 5) -> float:
    """Median CUDA-event time of ``fn``, each call queued behind a GPU spin as the engine times candidates."""
    import torch

    from kernelpilot.evaluation.timing.interleaved import times_behind_spin

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return statistics.median(times_behind_spin(fn, reps))


def measure(device: str = "cuda") -> Ceilings:
    import torch

    index = torch.device(device).index or 0
    name, driver, clocks = gpu_identity(index)
    nbytes = 1 << 30
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    copy_ms = _median_ms(lambda: dst.copy_(src))
    tflops: dict[str, float] = {}
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    tflops["bfloat16"] = 2 * n**3 / (_median_ms(lambda a=a, b=b: torch.mm(a, b)) * 1e-3) / 1e12
    del a, b
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        rates = []
        for m in (4096, 8192):
            a32 = torch.randn(m, m, device=device)
            b32 = torch.randn(m, m, device=device)
            rates.append(2 * m**3 / (_median_ms(lambda a32=a32, b32=b32: torch.mm(a32, b32)) * 1e-3) / 1e12)
        tflops["float32"] = max(rates)
        torch.backends.cuda.matmul.allow_tf32 = True
        tflops["tf32"] = 2 * m**3 / (_median_ms(lambda a32=a32, b32=b32: torch.mm(a32, b32)) * 1e-3) / 1e12
        del a32, b32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    torch.cuda.empty_cache()
    return Ceilings(gpu=name, driver=driver, copy_tbps=2 * nbytes / (copy_ms * 1e-3) / 1e12, tflops=tflops,
                    clocks=clocks, torch=torch.__version__,
                    measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


def get(device: str = "cuda", base: Path | None = None, refresh: bool = False) -> Ceilings:
    """The cached ceilings of this GPU, measuring them (about a second) the first time."""
    import torch

    index = torch.device(device).index or 0
    name, driver, _ = gpu_identity(index)
    if not refresh:
        cached = load_cached(name, driver, base)
        if cached is not None:
            return cached
    ceilings = measure(device)
    try:
        save(ceilings, base)
    except OSError:
        pass
    return ceilings
