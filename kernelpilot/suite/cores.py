"""Which CPU cores a suite's builds use and which each GPU slot's worker keeps to itself.

A timed worker that shares its cores with nvcc is timed on a busy host: on 2026-12-03, builds beside the timed
recurrent networks (host-bound: one kernel launch after another) moved eager by 10-51%. On a machine with cores
to spare, each slot's worker gets ``per_slot`` cores of its own (``KERNELPILOT_WORKER_CPUS``: the worker process
is started on them, so everything it starts stays there too), and the suite's own threads (the builds ahead, the
baseline service's compiles) run on the rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kernelpilot.evaluation.client.process import WORKER_CPUS as ENV  # "4,5": read by WorkerClient.launch

PER_SLOT = 2  # at the least: the worker's thread and one for what it starts (input draws, the host side)
SHARE = 4  # by default the workers take a quarter of the cores (16 cores, one GPU: 4), the builds the rest
MIN_CORES = 8  # fewer than this and the builds need every core: no split, and the run says so
MIN_BUILD = 2  # cores left for the builds at the least


@dataclass
class CoreSplit:
    build: list[int]
    workers: list[list[int]] = field(default_factory=list)  # per slot, in slot order; empty: no split
    note: str = ""

    original: list[int] = field(default_factory=list)  # the calling thread's cores before ``apply``

    def worker_env(self, slot: int) -> dict[str, str]:
        return {ENV: ",".join(map(str, self.workers[slot]))} if self.workers else {}

    def apply(self) -> None:
        """Keep the calling thread (and the threads and processes it starts from now on) on the build cores."""
        if self.workers and hasattr(os, "sched_setaffinity"):
            self.original = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, self.build)

    def restore(self) -> None:
        if self.original:
            os.sched_setaffinity(0, self.original)
            self.original = []


def available() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def split(cores: list[int], slots: int, per_slot: int | None = None) -> CoreSplit:
    """``per_slot`` None: a quarter of the cores shared among the slots (at least PER_SLOT each) where the machine
    has MIN_CORES; 0: no split. The workers take the last cores (the first take the system's interrupts more)."""
    cores = sorted(cores)
    want = per_slot if per_slot is not None else (
        max(PER_SLOT, len(cores) // (SHARE * max(1, slots))) if len(cores) >= MIN_CORES else 0)
    if want <= 0:
        why = "turned off" if per_slot == 0 else f"{len(cores)} cores (a split needs {MIN_CORES})"
        return CoreSplit(cores, note=f"builds and workers share every core ({why})")
    if len(cores) - want * slots < MIN_BUILD:
        return CoreSplit(cores, note=f"builds and workers share every core: {len(cores)} cores cannot give {slots} "
                                     f"worker(s) {want} each and the builds {MIN_BUILD}")
    taken = cores[len(cores) - want * slots:]
    workers = [taken[i * want:(i + 1) * want] for i in range(slots)]
    build = cores[:len(cores) - want * slots]
    named = "; ".join(",".join(map(str, w)) for w in workers)
    return CoreSplit(build, workers, f"each GPU slot's worker on cores {named}, builds on {len(build)} others")
