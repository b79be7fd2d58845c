"""What one run of `kernelpilot apply` measures besides its step times: peak device memory, the loss at every
step, and what torch.compile's Dynamo did.

- **Memory** (``MemoryWatch``): the runs share one process, so before each run the collector runs and the
  allocator's free cache is released, and what is still allocated then (nothing a run keeps stays on the device:
  ``kernelpilot.dropin.apply_run`` copies its comparison tensors to the host) is taken off. At the first measured
  step ``torch.cuda.reset_peak_memory_stats()``; at the end of the measured steps PyTorch's peak allocated and peak
  reserved bytes, and NVML's (nvidia-ml-py) used memory of this process on the device, or of the whole device
  when NVML does not list the process (a container's PID namespace), including the CUDA context. Without a CUDA
  device every field is None with a note; without NVML its field is None with a note.
- **Loss** (``LossRecorder``): every one-element floating tensor a backward starts from (``loss.backward()``,
  ``torch.autograd.backward``), summed per step (gradient accumulation: the step's micro-batches); for a script
  that calls no backward, the model output's ``loss`` (a transformers ``ModelOutput`` or a dict). Kept on the
  device as it is computed (no synchronization inside a timed step), read once the run is over.
- **Dynamo** (``DynamoWatch``): what the run added to ``torch._dynamo.utils.counters`` (graph breaks: the sum of
  ``counters["graph_break"]``; graphs: ``counters["stats"]["unique_graphs"]``; frames compiled:
  ``counters["frames"]["total"]``) and the compilations Dynamo recorded with a recompile reason
  (``torch._dynamo.utils.get_compilation_metrics()``): the recompilations.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

NO_CUDA_NOTE = "no CUDA device in use: peak memory not measured (PyTorch's allocator and NVML count device memory)"


@dataclass
class Memory:
    """A run's device memory over its measured steps (bytes; None where not measured, ``note`` says why)."""

    peak_mem_bytes: int | None = None  # torch.cuda.max_memory_allocated(), less what was held before the run
    peak_reserved_bytes: int | None = None  # torch.cuda.max_memory_reserved(), likewise
    nvml_used_bytes: int | None = None  # NVML, at the end of the measured steps
    nvml_what: str = ""  # "process" (this process's used memory) or "device" (the device's, every process)
    note: str = ""


def _cuda_in_use() -> bool:
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


class MemoryWatch:
    """Peak device memory of one run: ``start()`` before the script runs, ``reset()`` at the first measured step,
    ``read()`` after the last."""

    def __init__(self) -> None:
        self.held_allocated = 0
        self.held_reserved = 0
        self.was_reset = False

    def start(self) -> None:
        gc.collect()
        if not _cuda_in_use():
            return
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.held_allocated = torch.cuda.memory_allocated()
        self.held_reserved = torch.cuda.memory_reserved()

    def reset(self) -> None:
        if _cuda_in_use():
            import torch

            torch.cuda.reset_peak_memory_stats()
            self.was_reset = True

    def read(self) -> Memory:
        if not _cuda_in_use():
            return Memory(note=NO_CUDA_NOTE)
        import torch

        torch.cuda.synchronize()
        used, what, note = nvml_used(torch.cuda.current_device())
        mem = Memory(max(torch.cuda.max_memory_allocated() - self.held_allocated, 0),
                     max(torch.cuda.max_memory_reserved() - self.held_reserved, 0), used, what, note)
        if not self.was_reset:
            mem.note = "; ".join(n for n in ("the run ended before its measured steps: peaks of the whole run",
                                             mem.note) if n)
        return mem


def nvml_used(index: int) -> tuple[int | None, str, str]:
    """NVML's used memory on the CUDA device ``index``: (bytes, "process" or "device", note), or (None, "", why)."""
    try:
        import pynvml
    except ImportError:
        return None, "", "NVML not read: nvidia-ml-py (import pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, "", f"NVML not read: {exc}"
    try:
        handle = _nvml_handle(pynvml, index)
        pid = os.getpid()
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == pid and isinstance(proc.usedGpuMemory, int):
                return int(proc.usedGpuMemory), "process", ""
        return (int(pynvml.nvmlDeviceGetMemoryInfo(handle).used), "device",
                "NVML does not list this process (a container's PID namespace): the device's used memory, every "
                "process and the CUDA context")
    except pynvml.NVMLError as exc:
        return None, "", f"NVML not read: {exc}"
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _nvml_handle(pynvml: Any, index: int) -> Any:
    """The NVML handle of CUDA device ``index``, by its UUID (CUDA_VISIBLE_DEVICES renumbers devices), else by index."""
    import torch

    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
    for name in (uuid, "GPU-" + uuid) if uuid else ():
        with contextlib.suppress(pynvml.NVMLError):
            return pynvml.nvmlDeviceGetHandleByUUID(name)
    return pynvml.nvmlDeviceGetHandleByIndex(index)


class LossRecorder:
    """The loss at every step of a run (see the module's docstring)."""

    def __init__(self) -> None:
        self.step = -1  # before the script's first call of its model: nothing is recorded
        self.backward: dict[int, list[Any]] = {}
        self.output: dict[int, Any] = {}

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """``torch.autograd.backward`` (which ``Tensor.backward`` calls) records its scalar root while inside."""
        import torch

        original = torch.autograd.backward

        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            self._record(tensors)
            return original(tensors, *args, **kwargs)

        torch.autograd.backward = backward  # type: ignore[assignment]
        try:
            yield
        finally:
            torch.autograd.backward = original  # type: ignore[assignment]

    def _record(self, tensors: Any) -> None:
        import torch

        if (self.step >= 0 and isinstance(tensors, torch.Tensor) and tensors.numel() == 1
                and tensors.is_floating_point()):
            self.backward.setdefault(self.step, []).append(tensors.detach().clone())

    def on_output(self, output: Any) -> None:
        """The model output's ``loss``, if it has one (used when the script calls no backward)."""
        import torch

        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if self.step >= 0 and isinstance(loss, torch.Tensor) and loss.numel() == 1 and self.step not in self.output:
            self.output[self.step] = loss.detach().clone()

    def values(self, steps: int) -> tuple[list[float | None] | None, str]:
        """The loss of each of the run's ``steps`` steps (None for a step without one: a call of the model for
        evaluation between training steps) and its dtype, or (None, "") when no step has one."""
        kept = self.backward if self.backward else {k: [v] for k, v in self.output.items()}
        if not any(i in kept for i in range(steps)):
            return None, ""
        dtype = str(next(iter(kept.values()))[0].dtype).removeprefix("torch.")
        return [float(sum(float(t) for t in kept[i])) if i in kept else None for i in range(steps)], dtype


@dataclass
class CompileCounts:
    """What Dynamo did during one run."""

    graph_breaks: int = 0
    recompiles: int = 0
    graphs: int = 0
    frames: int = 0
    break_reasons: list[str] = field(default_factory=list)  # the first line of each distinct reason
    recompile_reasons: list[str] = field(default_factory=list)


class DynamoWatch:
    """``torch._dynamo``'s counters and compilation records before a run, to take from those after it."""

    def __init__(self) -> None:
        from torch._dynamo import utils

        if hasattr(utils, "set_compilation_metrics_limit"):
            utils.set_compilation_metrics_limit(4096)  # the default keeps only the last 64 compilations
        self.before = {k: dict(v) for k, v in utils.counters.items()}
        self.seen = {id(m) for m in _metrics()}

    def counts(self) -> CompileCounts:
        from torch._dynamo import utils

        def added(group: str, key: str | None = None) -> dict[str, int]:
            now, was = dict(utils.counters.get(group, {})), self.before.get(group, {})
            keys = [key] if key is not None else list(now)
            return {k: now.get(k, 0) - was.get(k, 0) for k in keys if now.get(k, 0) - was.get(k, 0) > 0}

        breaks = added("graph_break")
        new = [m for m in _metrics() if id(m) not in self.seen]
        reasons = [str(getattr(m, "recompile_reason", None)) for m in new if getattr(m, "recompile_reason", None)]
        return CompileCounts(graph_breaks=sum(breaks.values()), recompiles=len(reasons),
                             graphs=sum(added("stats", "unique_graphs").values()),
                             frames=sum(added("frames", "total").values()),
                             break_reasons=list(dict.fromkeys(str(r).strip().splitlines()[0] for r in breaks if r)),
                             recompile_reasons=list(dict.fromkeys(r.strip().splitlines()[0] for r in reasons)))


def _metrics() -> list[Any]:
    from torch._dynamo import utils

    return list(utils.get_compilation_metrics()) if hasattr(utils, "get_compilation_metrics") else []
