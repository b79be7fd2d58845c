"""Eager and torch.compile baselines, measured once per problem and GPU, off the evaluation worker.

A suite judges many candidates of each problem; compiling torch.compile's baseline from cold caches inside the
GPU slot cost the slot 5-30 s a candidate. ``BaselineService`` keeps a few worker processes of
its own (``processes``; unconfined: they run only the problem's code and Inductor, as a build runs the
compiler) that, per problem:

1. compile torch.compile's graph (CPU work: Inductor's lowering and Triton's compiler, one thread per
   process so that several problems compile side by side), its runs and autotuning under the GPU's
   shared lock (gpu_lock.py: they may overlap a candidate's verification, never a timing);
2. time eager and the compiled graph interleaved with the engine's own timing (the same input pool,
   L2 flush and GPU spin as a candidate's benchmark) under the GPU's exclusive lock;
3. free everything of the problem, and answer a ``Baselines`` stamped with the GPU's UUID, driver,
   torch version and clocks.

The GPU slot still times eager and torch.compile beside each candidate, in the same rounds (a ratio against a
time measured minutes earlier moved 10-50% with the GPU's state): its compile of the problem is then a hit in
Inductor's caches, and it takes from these baselines only what does not drift, the problem's analysis and
torch.compile's own check (correctness/compiled_check.py). Problems that wait for memory: each request is sized
on the meta device and the service keeps the estimates it runs at once under ``memory_fraction`` of the GPU.
``cache`` (a suite's run store) keeps baselines across resumed calls, reused only where the GPU's identity matches.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kernelpilot.evaluation.baselines.identity import (  # noqa: F401 - the service's names, as callers use them
    TIMING_FIELDS,
    current_identity,
    identity_mismatch,
    request_key,
)
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.evaluator import Evaluator
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.timing.gpu_lock import gpu_key
from kernelpilot.problem import analyse, load_problem


class BaselineCache(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, problem: str, baselines: dict[str, Any]) -> None: ...


@dataclass
class Request:
    key: str
    problem: Path
    settings: EvalSettings
    future: Future[Baselines]
    need_bytes: int = 0
    notes: list[str] = field(default_factory=list)


def estimate_bytes(problem: Path) -> int:
    """GPU memory a baseline of ``problem`` takes at its peak: its inputs, parameters and outputs sized on
    the meta device, times the timing pool and the calls beside it (16 GiB when the meta device cannot run it)."""
    try:
        info = analyse(load_problem(problem), device="meta")
        moved = int(info.bytes_moved or 0)
    except Exception:  # noqa: BLE001 - sized generously instead
        return 16 << 30
    return 6 * moved + (2 << 30)


class _Memory:
    """The GPU memory the running baselines are estimated to take, kept under ``total``."""

    def __init__(self, total: int) -> None:
        self.total, self.used = total, 0
        self.cond = threading.Condition()

    def take(self, n: int) -> int:
        n = min(n, self.total)
        with self.cond:
            while self.used + n > self.total:
                self.cond.wait()
            self.used += n
        return n

    def give(self, n: int) -> None:
        with self.cond:
            self.used -= n
            self.cond.notify_all()


def _device_bytes(gpu: int | None) -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByUUID(gpu_key(gpu))).total)
    except Exception:  # noqa: BLE001
        return 80 << 30


class BaselineService:
    """Baselines of problems on one GPU, measured by ``processes`` workers of their own, once each."""

    def __init__(self, settings: EvalSettings, workdir: Path, *, gpu: int | None = None, processes: int = 4,
                 memory_fraction: float = 0.25, cache: BaselineCache | None = None,
                 estimate: Callable[[Path], int] = estimate_bytes) -> None:
        self.settings = settings
        self.workdir = Path(workdir)
        self.gpu = gpu
        self.cache = cache
        self.estimate = estimate
        self.identity = current_identity(gpu)
        device = _device_bytes(gpu)
        self._memory = _Memory(int(device * memory_fraction))
        self.exclusive_bytes = int(device * 0.2)
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._requests: dict[str, Future[Baselines]] = {}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"kp-baseline-{i}", daemon=True)
                         for i in range(max(1, processes))]
        for t in self._threads:
            t.start()

    def request(self, problem: Path, settings: EvalSettings | None = None) -> Future[Baselines]:
        """A Future of the problem's ``Baselines`` (the same Future for every sample of the problem)."""
        settings = settings or self.settings
        problem = Path(problem).resolve()
        key = request_key(problem, settings)
        with self._lock:
            if key in self._requests:
                return self._requests[key]
            future: Future[Baselines] = Future()
            self._requests[key] = future
        notes: list[str] = []
        stored = self.cache.get(key) if self.cache is not None else None
        if stored is not None:
            base = Baselines.from_dict(stored)
            differs = identity_mismatch(base.identity(), self.identity)
            if not differs:
                future.set_result(base)
                return future
            notes.append(f"re-measured: the stored baselines were measured on another setting ({differs})")
        self._queue.put(Request(key, problem, settings, future, notes=notes))
        return future

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=30)

    # ---- worker threads --------------------------------------------------------------------------
    def _serve(self, index: int) -> None:
        """One baseline worker process, launched from (and dying with) this long-lived thread."""
        settings = replace(self.settings, confine=False)
        evaluator = Evaluator(settings, workdir=self.workdir / f"baseline-{index}", keep_warm=True, gpu=self.gpu,
                              worker_env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})
        try:
            while True:
                req = self._queue.get()
                if req is None:
                    return
                if not req.future.set_running_or_notify_cancel():
                    continue
                need = self.estimate(req.problem)
                held = self._memory.take(need)
                try:
                    # a problem that would not fit beside a candidate's verification has the GPU to itself
                    base = evaluator.baselines(req.problem, settings=replace(req.settings, confine=False), forget=True,
                                               exclusive=need > self.exclusive_bytes)
                    base.notes = req.notes + base.notes
                    if self.cache is not None:
                        self.cache.put(req.key, str(req.problem), base.to_dict())
                    req.future.set_result(base)
                except Exception as exc:  # noqa: BLE001 - the slot still judges the candidate, without a baseline
                    req.future.set_exception(exc)
                finally:
                    self._memory.give(held)
        finally:
            evaluator.close()


def as_message(baselines: Baselines) -> dict[str, Any]:
    """A Baselines as the worker's evaluate request carries it."""
    return asdict(baselines)
