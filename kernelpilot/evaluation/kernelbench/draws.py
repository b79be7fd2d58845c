"""KernelBench's input sets of several seeds drawn side by side in forked children (worker side; imports torch
lazily).

KernelBench draws every input set with torch's CPU generator, which is serial: 10-20 s a set at level 1's
current sizes, six sets (five trials and the timing) for a problem's first candidate, one after the other while
the GPU waits. The sets of different seeds do not depend on each other, so each goes to a forked child that does
exactly what the serial draw does (``set_seed(seed)``, ``get_inputs()``, on one thread), copies the tensors
into memory shared with the parent (sized beforehand from ``get_inputs()`` on the meta device) and sends back
their layout and the state the draw left the CPU generator in. The parent then has the very values and state
a serial draw gives. A set a child cannot send as it is (a tensor off the CPU, not dense and contiguous, or
needing grad; a value that does not pickle; CUDA touched by ``get_inputs``, which a forked child cannot use; any
error) is not returned, and the caller draws it serially, as before.
"""

from __future__ import annotations

import mmap
import os
import pickle
import select
import struct
from collections.abc import Callable
from typing import Any

from kernelpilot.evaluation.forks import end_child, fork_quietly

_LEN = struct.Struct("<Q")
_ALIGN = 64


def size_hint(get_inputs: Callable[[], list[Any]]) -> int | None:
    """Bytes of one input set, from ``get_inputs()`` on the meta device (no values drawn, the CPU generator
    untouched); None when it cannot run there."""
    import torch

    try:
        with torch.device("meta"):
            items = list(get_inputs())
    except Exception:  # noqa: BLE001 - a get_inputs the meta device cannot run: no estimate
        return None
    return nbytes(items)


def nbytes(items: list[Any]) -> int:
    """Bytes of the tensors in an input set."""
    import torch

    return sum(x.numel() * x.element_size() for x in items if isinstance(x, torch.Tensor))


def _write_all(fd: int, data: memoryview) -> None:
    while len(data):
        data = data[os.write(fd, data):]


def _read_exact(fd: int, buf: memoryview) -> None:
    while len(buf):
        n = os.readv(fd, [buf])
        if n == 0:
            raise EOFError("the drawing child closed its pipe early")
        buf = buf[n:]


def _child(fd: int, shared: mmap.mmap, seed: int, get_inputs: Callable[[], list[Any]],
           set_seed: Callable[[int], None]) -> int:
    import torch

    torch.set_num_threads(1)  # the draw is serial; no OpenMP pool in a forked child
    set_seed(seed)
    items = list(get_inputs())
    meta: list[tuple[str, Any]] = []
    offset = 0
    for x in items:
        if not isinstance(x, torch.Tensor):
            meta.append(("value", pickle.dumps(x)))
            continue
        if x.device.type != "cpu" or x.is_sparse or x.requires_grad or not x.is_contiguous():
            raise TypeError(f"a {x.device.type} tensor, sparse, needing grad or not contiguous: drawn serially")
        n = x.numel() * x.element_size()
        if offset + n > len(shared):
            raise ValueError("the set is larger than get_inputs() on the meta device said: drawn serially")
        if n:
            torch.frombuffer(shared, dtype=torch.uint8, count=n, offset=offset).copy_(x.reshape(-1).view(torch.uint8))
        meta.append(("tensor", (str(x.dtype).removeprefix("torch."), tuple(x.shape), offset)))
        offset += -(-n // _ALIGN) * _ALIGN
    header = pickle.dumps({"ok": True, "items": meta, "rng": bytes(torch.get_rng_state().numpy())})
    _write_all(fd, memoryview(_LEN.pack(len(header)) + header))
    return 0


def _receive(fd: int, shared: mmap.mmap) -> tuple[list[Any], Any]:
    import torch

    head = bytearray(_LEN.size)
    _read_exact(fd, memoryview(head))
    body = bytearray(_LEN.unpack(head)[0])
    _read_exact(fd, memoryview(body))
    header = pickle.loads(bytes(body))
    if not header.get("ok"):
        raise RuntimeError(header.get("error", "the drawing child failed"))
    items: list[Any] = []
    for kind, what in header["items"]:
        if kind == "value":
            items.append(pickle.loads(what))
            continue
        dtype, shape, offset = what
        dt = getattr(torch, dtype)
        numel = 1
        for d in shape:
            numel *= d
        n = numel * torch.empty((), dtype=dt).element_size()
        # the tensor lives in the shared memory (kept alive by it): no copy here
        raw = (torch.frombuffer(shared, dtype=torch.uint8, count=n, offset=offset) if n
               else torch.empty(0, dtype=torch.uint8))
        items.append(raw.view(dt).reshape(shape))
    state = torch.frombuffer(bytearray(header["rng"]), dtype=torch.uint8)
    return items, state


def draw(seeds: list[int], get_inputs: Callable[[], list[Any]], set_seed: Callable[[int], None],
         parallel: int, size: int, timeout_s: float = 3600.0) -> dict[int, tuple[list[Any], Any]]:
    """``{seed: (get_inputs()'s items as drawn, the CPU generator state after)}`` for the seeds whose children
    succeeded; at most ``parallel`` children at a time, each with ``size`` bytes (one set, from ``size_hint``)
    of memory shared with this process; read in the order they were started."""
    out: dict[int, tuple[list[Any], Any]] = {}
    pending = list(dict.fromkeys(seeds))
    running: list[tuple[int, int, int, mmap.mmap]] = []  # (seed, pid, read end, shared memory)
    room = size + _ALIGN * 1024  # each tensor starts aligned (a set of more than 1024 tensors: drawn serially)
    try:
        while pending or running:
            while pending and len(running) < max(1, parallel):
                seed = pending.pop(0)
                try:
                    shared = mmap.mmap(-1, room, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    r, w = os.pipe()
                except OSError:
                    pending.clear()  # no memory for it: the rest draw serially
                    break
                try:
                    pid = fork_quietly()  # the child only draws on one thread and exits
                except OSError:
                    os.close(r)
                    os.close(w)
                    pending.clear()  # no more children: the rest draw serially
                    break
                if pid == 0:  # the child: never returns into the caller's stack
                    code = 1
                    try:
                        os.close(r)
                        code = _child(w, shared, seed, get_inputs, set_seed)
                    except BaseException as exc:  # noqa: BLE001 - said to the parent, then exit
                        try:
                            header = pickle.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
                            _write_all(w, memoryview(_LEN.pack(len(header)) + header))
                        except BaseException:  # noqa: BLE001
                            pass
                    finally:
                        os._exit(code)
                os.close(w)
                running.append((seed, pid, r, shared))
            if not running:
                break
            seed, pid, r, shared = running.pop(0)
            try:
                ready, _, _ = select.select([r], [], [], timeout_s)
                if ready:
                    out[seed] = _receive(r, shared)
                else:  # stuck (a lock the fork copied held?): no more waiting, the rest draw serially
                    pending.clear()
                    for _seed, other, other_r, _shared in running:
                        os.close(other_r)
                        end_child(other)
                    running.clear()
            except Exception:  # noqa: BLE001 - this seed draws serially
                pass
            finally:
                os.close(r)
                end_child(pid)
    finally:
        for _seed, pid, r, _shared in running:
            os.close(r)
            end_child(pid)
    return out
