"""What the parallel recordings of record_all need and how they share the GPU: the problems (Item), each one's
size on the meta device (``estimate``: inputs, parameters, buffers and one output; ``estimate_all`` in spawned
processes, so this one never starts CUDA), and the Scheduler that starts a recording when its memory fits what
the running ones leave."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.problem import load_problem

WORKING_ROOM = 3 << 29  # 1.5 GiB per process beyond its tensors: CUDA context, Inductor's workspace
UNKNOWN_SIZE = 16 << 30  # a problem the meta device cannot size


@dataclass(frozen=True)
class Item:
    key: str  # level1/23_Softmax
    path: Path


@dataclass(frozen=True)
class Estimate:
    bytes: int
    work: float  # expected compile work, for the order only


def estimate(path: str, level: int) -> Estimate:
    """Inputs + parameters + buffers + one output on the meta device; ``work``: level and module count."""
    import torch

    try:
        module = load_problem(path).load_module()
        with torch.device("meta"):
            inputs = list(module.get_inputs())
            model = module.Model(*module.get_init_inputs())
            rnn = any(isinstance(m, torch.nn.RNNBase) for m in model.modules())
            out = None if rnn else model(*inputs)  # the meta device runs an RNN step by step: slow, and small
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
        outs = out if isinstance(out, (tuple, list)) else [out]
        tensors += [o for o in outs if isinstance(o, torch.Tensor)]
        modules = sum(1 for _ in model.modules())
        return Estimate(int(sum(t.numel() * t.element_size() for t in tensors)), level * 1000 + modules)
    except Exception:  # noqa: BLE001 - a problem the meta device cannot run: assume a large one
        return Estimate(UNKNOWN_SIZE, level * 1000)


def estimate_all(items: list[Item], jobs: int, timeout: float = 120.0) -> dict[str, Estimate]:
    """``estimate`` for every item, in a process pool (spawned: this process must not start CUDA)."""
    import multiprocessing

    def level(key: str) -> int:
        head = key.split("/", 1)[0]
        return int(head[5:]) if head.startswith("level") and head[5:].isdigit() else 1

    out: dict[str, Estimate] = {}
    if not items:
        return out
    pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(items))),
                               mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {i.key: pool.submit(estimate, str(i.path), level(i.key)) for i in items}
        started = time.monotonic()
        for key, future in futures.items():
            try:
                out[key] = future.result(timeout=max(1.0, timeout - (time.monotonic() - started)))
            except FutureTimeout:
                out[key] = Estimate(UNKNOWN_SIZE, level(key) * 1000)
            except Exception:  # noqa: BLE001 - a worker that died: assume a large problem
                out[key] = Estimate(UNKNOWN_SIZE, level(key) * 1000)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return out


class Scheduler:
    """Hands out items in order, each when its memory fits what the running ones leave."""

    def __init__(self, order: list[Item], need: dict[str, int], total: int, deadline: float | None) -> None:
        self.todo = list(order)
        self.need = {k: min(v, total) for k, v in need.items()}
        self.total, self.used, self.running = total, 0, 0
        self.deadline = deadline
        self.cond = threading.Condition()

    def take(self) -> Item | None:
        with self.cond:
            while True:
                if not self.todo or (self.deadline is not None and time.monotonic() > self.deadline):
                    return None
                hit = next((i for i in self.todo if self.used + self.need[i.key] <= self.total), None)
                if hit is not None or self.running == 0:
                    hit = hit or self.todo[0]
                    self.todo.remove(hit)
                    self.used += self.need[hit.key]
                    self.running += 1
                    return hit
                self.cond.wait(timeout=5.0)

    def give(self, item: Item) -> None:
        with self.cond:
            self.used -= self.need[item.key]
            self.running -= 1
            self.cond.notify_all()
