"""GPU memory in the worker: what the harness holds when it calls candidate code, and how much it may take.

- ``note_call(phase)``: called (through ``watchdog.calls``) right before every call into candidate
  code; remembers the bytes the process had allocated then (the harness's inputs, references,
  baselines: everything but what the call itself allocates), so an out-of-memory verdict can say who
  held what (``report``).
- ``input_pool_size``: how many timing input sets fit beside the calls that use them.
- ``release``: what a problem leaves behind goes back to the driver (between problems).

Imports torch lazily; on a CPU worker every figure is None.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

_last: dict[str, Any] = {"held": None, "phase": ""}


def _cuda() -> ModuleType | None:
    import torch

    return torch if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def note_call(phase: str) -> None:
    torch = _cuda()
    _last["phase"] = phase
    _last["held"] = int(torch.cuda.memory_allocated()) if torch is not None else None


def requested_bytes(message: str) -> int | None:
    """The size in "Tried to allocate 12.00 GiB" of a CUDA out-of-memory message, in bytes."""
    m = re.search(r"Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)", message)
    if not m:
        return None
    return int(float(m.group(1)) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[m.group(2)])


def report(message: str) -> dict[str, Any]:
    """A MemoryReport (as a dict) for an out-of-memory error with this message."""
    torch = _cuda()
    free = total = None
    if torch is not None:
        try:
            free, total = (int(v) for v in torch.cuda.mem_get_info())
        except Exception:  # noqa: BLE001 - a poisoned context: the figures we have are enough
            pass
    return {"engine_held_bytes": _last["held"], "requested_bytes": requested_bytes(message),
            "device_total_bytes": total, "device_free_bytes": free, "phase": _last["phase"]}


def describe(rep: dict[str, Any]) -> str:
    def gib(v: int | None) -> str:
        return "?" if v is None else f"{v / 2**30:.1f} GiB"

    return (f"out of GPU memory in {rep.get('phase') or 'the candidate'}: the harness held "
            f"{gib(rep.get('engine_held_bytes'))} when it called the candidate, the failing allocation asked for "
            f"{gib(rep.get('requested_bytes'))}, "
            f"{gib(rep.get('device_free_bytes'))} of {gib(rep.get('device_total_bytes'))} free afterwards")


def input_pool_size(per_set: int, call_bytes: int, wanted: int, reserve: int = 0) -> int:
    """Timing input sets to keep alive at once: ``wanted`` when they fit, fewer (never below 2, the
    least that keeps addresses distinct) when one set is large. ``call_bytes``: what one call of the
    three timed implementations allocates at its peak (outputs and temporaries); ``reserve``: the
    L2-flush buffer and anything else the timing loop holds."""
    torch = _cuda()
    if torch is None or per_set <= 0:
        return wanted
    free, _total = torch.cuda.mem_get_info()
    free += int(torch.cuda.memory_reserved() - torch.cuda.memory_allocated())  # the allocator's cache is usable
    budget = int(0.8 * (free - 3 * call_bytes - reserve))
    return max(2, min(wanted, budget // per_set)) if budget > 0 else 2


def release(device: str) -> None:
    """Collect garbage and return the allocator's cached blocks to the driver."""
    import gc

    gc.collect()
    if str(device).startswith("cuda"):
        torch = _cuda()
        if torch is not None:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
