"""The local pool: builds on every core ahead of the GPUs, one evaluation worker per GPU.

``submit(problem, candidate, mode)`` returns a Future of a :class:`SlotResult`. The candidate is
first built (static policy + build, ``mode="build"``, no worker, no GPU) by a thread of the build pool
(its own build-only Evaluator per thread; the build itself runs in a subprocess, so threads overlap);
a candidate that built is queued for the GPU slots. Each slot owns one warm Evaluator pinned to its
GPU (``Evaluator(gpu=N)``, its own workdir) and serves one request at a time, so no two timed
measurements ever share a GPU. The slot's evaluation finds the build done (a no-op ninja step).
A hang or a crash costs its slot the watchdog time; the engine gives the slot a fresh worker.

A candidate with nothing to compile (pure PyTorch) takes a lane of its own (``QUICK_LANE`` threads): behind a
wall of CUDA builds (45-80 s each, one per core) it would wait for a thread while its GPU slot had nothing to
judge (the H100 folder run of 2026-12-05: the slot busy half the wall time of a call that built ~45 extensions).

A free slot takes the oldest queued candidate of the problem it judged last, else the oldest of all
(``ProblemQueue``): its worker holds one problem at a time (the model, its float64 copy, KernelBench's
input sets), so candidates of one problem that build out of order are not judged between other
problems' candidates, each switch loading the problem again.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.suite import cores
from kernelpilot.verdict import Verdict


@dataclass
class SlotResult:
    verdict: Verdict
    gpu: str | None = None  # the slot ("gpu0", "node-ab12/gpu1"); None when it never reached a GPU


@dataclass
class SlotStats:
    name: str
    served: int = 0
    busy_s: float = 0.0  # from the worker's own windows
    windows: list[tuple[float, float]] = field(default_factory=list)


class ProblemQueue:
    """A FIFO of built jobs (tuples whose first item is the problem's path; None stops a slot) from which a
    slot takes the oldest job of the problem it ran last, else the oldest job."""

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._ready = threading.Condition()

    def put(self, item: Any) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()

    def get(self, prefer: Path | None = None) -> Any:
        with self._ready:
            while not self._items:
                self._ready.wait()
            if prefer is not None:
                for i, item in enumerate(self._items):
                    if item is not None and item[0] == prefer:
                        return self._items.pop(i)
            return self._items.pop(0)


def failed_verdict(problem: Path, candidate: Path, mode: str, exc: BaseException) -> Verdict:
    """A verdict for an evaluation the engine could not even attempt (a broken problem file, say)."""
    text = f"{type(exc).__name__}: {exc}"
    return Verdict(status="runtime_error", problem=str(problem), candidate=str(candidate), mode=mode,
                   error=text, summary=f"not evaluated: {text[:200]}",
                   flags=["the suite could not evaluate this job (see error)"])


def when_all(futures: list[Future[Any]], then: Any) -> None:
    """Call ``then()`` once every future is done (at once when there are none), from whichever finishes last."""
    if not futures:
        then()
        return
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            then()

    for f in futures:
        f.add_done_callback(one_done)


def shared_baseline(future: Future[Any]) -> Any:
    """The problem's Baselines from the service, or, when measuring them failed, Baselines that say why
    (the candidate is still judged and timed beside eager; its verdict says there is no torch.compile time)."""
    from kernelpilot.evaluation.baselines.values import Baselines

    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - the service's failure is reported in the verdict, not raised
        reason = f"the baseline service could not measure this problem ({type(exc).__name__}: {str(exc)[:300]})"
        return Baselines(compiled_missing=reason, notes=[reason])


def job_roots(paths: list[Path]) -> list[Path]:
    """The fewest directories that hold every path (problems, candidates): their folders, nested ones dropped."""
    folders = sorted({(p if p.is_dir() else p.parent).resolve() for p in paths})
    return [f for f in folders if not any(o != f and o in f.parents for o in folders)]


def default_build_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


QUICK_LANE = 2  # threads for candidates that compile nothing


def compiles_nothing(candidate: Path) -> bool:
    """Whether a candidate's build step compiles nothing (no kernel of its own): its lane, not its verdict.
    A file that does not load as a candidate goes the usual way (its build step says why)."""
    from kernelpilot.evaluation.candidate import CandidateError, load_candidate

    try:
        return load_candidate(candidate).kind == "pytorch"
    except (CandidateError, OSError, SyntaxError, ValueError):
        return False


class LocalPool:
    """Build threads feeding one GPU slot per entry of ``gpus`` (None: the caller's CUDA_VISIBLE_DEVICES)."""

    def __init__(self, settings: Any, gpus: list[int | None], workdir: Path, build_workers: int | None = None,
                 roots: list[Path] = (), warm: bool = True,  # type: ignore[assignment]
                 baselines: list[Any] | None = None, core_split: cores.CoreSplit | None = None) -> None:
        """``roots``: directories holding every problem and candidate of the run, opened to each slot's
        worker from its start (its confinement is fixed then: a new directory would cost a restart).
        ``warm``: start each slot's worker now, while the first candidates build (not for build-only runs).
        ``baselines``: one BaselineService per slot (same order as ``gpus``): a benchmark job is then
        requested its problem's baselines when it is submitted, reaches its GPU once they are measured,
        and its slot compiles nothing (the service measured eager and torch.compile once per problem).
        ``core_split``: the cores each slot's worker keeps to itself, the pool's threads (builds) taking the rest
        (suite/cores.py), already applied by the caller; None: the default split, applied here. Undone at close."""
        from kernelpilot.evaluation import Evaluator

        if not gpus:
            raise ValueError("a pool needs at least one GPU slot")
        self.settings = settings
        self.workdir = Path(workdir)
        if core_split is None:  # this thread's later threads (builds, slots) inherit it; each worker starts on its own
            core_split = cores.split(cores.available(), len(gpus))
            core_split.apply()
        self.cores = core_split
        self._builders = ThreadPoolExecutor(max_workers=build_workers or default_build_workers(),
                                            thread_name_prefix="kp-build")
        self._quick = ThreadPoolExecutor(max_workers=QUICK_LANE, thread_name_prefix="kp-quick")
        self._local = threading.local()
        self._queue = ProblemQueue()
        self._closed = False
        self._cancelled = False
        self.baselines = list(baselines or [])
        self.stats: list[SlotStats] = []
        self.evaluators: list[Any] = []  # one per slot, in slot order
        self._build_evaluators: list[Any] = []  # one per build thread (each keeps a builder waiting)
        self._threads: list[threading.Thread] = []
        for index, gpu in enumerate(gpus):
            name = f"gpu{gpu if gpu is not None else index}"
            evaluator = Evaluator(settings, workdir=self.workdir / name, keep_warm=True, gpu=gpu, spare_worker=True,
                                  worker_env=self.cores.worker_env(index))
            evaluator.allow(list(roots))
            self.evaluators.append(evaluator)
            stats = SlotStats(name)
            self.stats.append(stats)
            launched = threading.Event()
            if not warm:
                launched.set()
            t = threading.Thread(target=self._slot, args=(evaluator, stats, None if not warm else launched, index),
                                 name=f"kp-{name}", daemon=True)
            t.start()
            launched.wait(timeout=60)
            self._threads.append(t)

    # ---- public ----------------------------------------------------------------------------------
    def submit(self, problem: Path, candidate: Path, mode: str, settings: Any = None) -> Future[SlotResult]:
        """``settings``: this job's EvalSettings (the problem's project config), else the pool's."""
        future: Future[SlotResult] = Future()
        settings = settings or self.settings
        shared = [svc.request(Path(problem), settings) for svc in self.baselines] if mode == "benchmark" else []
        lane = self._quick if compiles_nothing(Path(candidate)) else self._builders
        lane.submit(self._build, Path(problem), Path(candidate), mode, settings, future, shared)
        return future

    def evaluate(self, problem: Any, candidate: Any, mode: str = "benchmark", **_: Any) -> Verdict:
        return self.submit(Path(problem), Path(candidate), mode).result().verdict

    async def evaluate_async(self, problem: Any, candidate: Any, mode: str = "benchmark", **_: Any) -> Verdict:
        path = getattr(problem, "path", problem)
        result = await asyncio.wrap_future(self.submit(Path(path), Path(candidate), mode))
        return result.verdict

    def close(self, cancel: bool = False) -> None:
        """Finish (or, with ``cancel``, drop) queued work, stop the slots and their workers."""
        if self._closed:
            return
        self._closed = True
        self._cancelled = cancel
        for lane in (self._quick, self._builders):
            lane.shutdown(wait=not cancel, cancel_futures=cancel)
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=None if not cancel else 5)
        for ev in self._build_evaluators:
            ev.close()
        for svc in self.baselines:  # after the slots: nothing waits for a baseline any more
            svc.close()
        self.cores.restore()

    # ---- stages ----------------------------------------------------------------------------------
    def _builder(self) -> Any:
        ev = getattr(self._local, "evaluator", None)
        if ev is None:
            from kernelpilot.evaluation import Evaluator

            quick = threading.current_thread().name.startswith("kp-quick")  # compiles nothing: no builder waits
            ev = Evaluator(self.settings, workdir=self.workdir / f"build-{threading.get_ident()}", keep_warm=False,
                           standby_builder=not quick)
            self._local.evaluator = ev
            self._build_evaluators.append(ev)
        return ev

    def _build(self, problem: Path, candidate: Path, mode: str, settings: Any, future: Future[SlotResult],
               shared: list[Future[Any]] = ()) -> None:  # type: ignore[assignment]
        if not future.set_running_or_notify_cancel():
            return
        try:
            builder = self._builder()
            builder.settings = settings
            built = builder.evaluate(problem, candidate, "build")
        except Exception as exc:  # noqa: BLE001 - one job's failure must not stop the suite
            future.set_result(SlotResult(failed_verdict(problem, candidate, mode, exc)))
            return
        if built.status != "ok" or mode == "build":
            built.mode = mode
            future.set_result(SlotResult(built))
            return
        item = (problem, candidate, mode, settings, built.seconds, time.monotonic(), future, list(shared))
        when_all(list(shared), lambda: self._queue.put(item))  # to a GPU once its problem's baselines exist

    def _slot(self, evaluator: Any, stats: SlotStats, launched: threading.Event | None, index: int = 0) -> None:
        if launched is not None:
            try:
                evaluator.start_worker()  # spawned by this thread, which outlives it: up while the first builds run
            finally:
                launched.set()
        last: Path | None = None
        try:
            while True:
                item = self._queue.get(prefer=last)
                if item is None:
                    return
                problem, candidate, mode, settings, build_s, queued_at, future, shared = item
                last = problem
                if self._cancelled:
                    continue
                taken = time.monotonic()
                waited = taken - queued_at
                baseline = shared_baseline(shared[index]) if index < len(shared) else None
                try:
                    evaluator.settings = settings  # one job at a time on this slot: safe to switch
                    verdict = evaluator.evaluate(problem, candidate, mode, baseline=baseline)
                except Exception as exc:  # noqa: BLE001
                    verdict = failed_verdict(problem, candidate, mode, exc)
                verdict.phases["suite_build"] = round(build_s, 3)
                verdict.phases["suite_queue"] = round(waited, 3)
                verdict.phases["suite_slot"] = round(time.monotonic() - taken, 3)  # the slot held this job
                if len(verdict.worker_window) == 2:
                    start, end = verdict.worker_window
                    stats.windows.append((start, end))
                    stats.busy_s += max(0.0, end - start)
                stats.served += 1
                future.set_result(SlotResult(verdict, stats.name))
        finally:
            evaluator.close()
