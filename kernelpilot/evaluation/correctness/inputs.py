"""A trial's inputs, inside the worker: drawn fresh per seed and distribution, cloned, compared, upcast, and the
caching allocator filled with NaN blocks before a candidate runs (imports torch lazily)."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kernelpilot.problem import make_inputs

if TYPE_CHECKING:
    import torch

SMALL_POOL_BLOCK = 1 << 20  # the caching allocator's small-pool limit (1 MiB)

# A forward's arguments: get_inputs()'s items, tensors and any other Python values (sizes, flags, None)
Inputs = list[Any]
# an ``extra_shapes`` entry of the project config: {"name": ..., "inputs": [...]} (kernelpilot.problem.make_inputs)
ShapeSet = dict[str, Any]


def problem_dtype(inputs: Inputs, model: torch.nn.Module) -> torch.dtype:
    import torch

    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.dtype
    for p in list(model.parameters()) + list(model.buffers()):
        if p.is_floating_point():
            return p.dtype
    return torch.float32


# ---- inputs --------------------------------------------------------------------------------------
def _redraw(x: torch.Tensor, distribution: str, gen: torch.Generator, device: str) -> torch.Tensor:
    import torch

    if distribution == "native":
        return x.to(device)
    nonneg = bool((x >= 0).all()) if x.numel() else False
    shape = tuple(x.shape)
    if distribution == "uniform":
        v = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
        v = v if nonneg else v * 2 - 1
    else:
        v = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        if distribution == "scaled":
            exponent = torch.rand((), generator=gen, device=device).item() * 6 - 3
            v = v * (10.0**exponent)
        elif distribution != "normal":
            raise ValueError(f"unknown input distribution {distribution!r}")
        v = v.abs() if nonneg else v
    return v.to(x.dtype)



def draw_inputs(module: ModuleType, seed: int, distribution: str, device: str,
                shape_spec: ShapeSet | None = None) -> Inputs:
    """One trial's inputs: get_inputs() (or an extra shape set) seeded with ``seed``, floats re-drawn on ``device``."""
    import torch

    torch.manual_seed(seed)
    # get_inputs() runs with ``device`` as the default device: problem files draw their tensors with
    # torch.randn(...) and no device, and drawing a 1 GiB bf16 tensor on the CPU takes seconds per call
    # (and per trial, per timing input set) only to be re-drawn on the GPU below.
    with torch.device(device):
        raw = list(make_inputs(module, shape_spec))  # shape_spec: an extra_shapes entry {name, inputs} or None
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    out: Inputs = []
    for x in raw:
        if isinstance(x, torch.Tensor):
            out.append(_redraw(x, distribution, gen, device) if x.is_floating_point() else x.to(device))
        else:
            out.append(x)
    return out



def clone_inputs(inputs: Inputs) -> Inputs:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]



def inputs_equal(a: Inputs, b: Inputs) -> bool:
    import torch

    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point():
                same = (x == y) | (torch.isnan(x) & torch.isnan(y))
                if not bool(same.all()):
                    return False
            elif not torch.equal(x, y):
                return False
    return True



def upcast(inputs: Inputs) -> Inputs:
    """Float64 copies of the float inputs (new tensors, also for inputs that are float64 already)."""
    import torch

    return [(x.double() if x.dtype != torch.float64 else x.clone())
            if isinstance(x, torch.Tensor) and x.is_floating_point()
            else (x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x)) for x in inputs]


# ---- poisoning ----------------------------------------------------------------------------------
def poison_allocator(nbytes: int, device: str) -> None:
    """Leave every free block of the caching allocator NaN-filled, plus fresh NaN segments.

    After ``empty_cache`` the only free blocks left are fragments of segments that still hold live
    tensors; the allocator snapshot names them, and allocating exactly their sizes (best fit) claims
    them so they can be filled. Then a block of ``nbytes`` (large pool) and 64 x 1 MiB (small pool)
    of NaN are allocated and freed, so new allocations land on NaN too.
    """
    import torch

    if not str(device).startswith("cuda"):
        return
    nan = float("nan")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    held = []
    for _ in range(4):
        try:
            free = [(seg.get("segment_type", "large"), int(b["size"])) for seg in torch.cuda.memory_snapshot()
                    for b in seg.get("blocks", []) if b.get("state") == "inactive"]
        except Exception:
            break
        if not free:
            break
        for kind, size in sorted(free, key=lambda f: f[1]):
            while size >= 512:
                chunk = min(size, SMALL_POOL_BLOCK) if kind == "small" else size
                block = torch.empty(chunk, dtype=torch.uint8, device=device)
                block.view(torch.float32)[: chunk // 4].fill_(nan)
                held.append(block)
                size -= chunk
    free_now, _total = torch.cuda.mem_get_info()
    big = max(min(int(nbytes), int(free_now * 0.5)), 0)
    if big >= SMALL_POOL_BLOCK * 2:
        held.append(torch.full((big // 4,), nan, dtype=torch.float32, device=device))
    for _ in range(64):  # 64 x 1 MiB: 32 fresh small-pool segments of 2 MiB, all NaN
        held.append(torch.full((SMALL_POOL_BLOCK // 4,), nan, dtype=torch.float32, device=device))
    torch.cuda.synchronize()
    del held
