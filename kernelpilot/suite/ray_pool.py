"""The Ray pool (``--ray auto|ADDRESS``): one actor per GPU of the cluster, each running the local pool's pair
of stages (builds in threads, then its one warm Evaluator pinned to its GPU).

Ray is imported only here, and this module only with ``--ray``. The driver sends each job's problem
file and candidate files (their bytes: the hosts share no file system) and keeps the verdicts; Ray
carries them, nothing of ours listens on the network. An actor is a threaded actor: several calls
build at once on its host's cores while its Evaluator's lock keeps one request at a time on its GPU.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kernelpilot.suite.pool import (
    QUICK_LANE,
    SlotResult,
    SlotStats,
    compiles_nothing,
    failed_verdict,
)
from kernelpilot.verdict import Verdict

MAX_CANDIDATE_BYTES = 32 << 20
_SKIP_DIRS = {"__pycache__", ".git", "build"}


def pack_candidate(candidate: Path) -> dict[str, bytes]:
    """The candidate's files by relative path (a directory's tree, or the one file)."""
    candidate = Path(candidate)
    if candidate.is_file():
        return {candidate.name: candidate.read_bytes()}
    files = {}
    for p in sorted(candidate.rglob("*")):
        rel = p.relative_to(candidate)
        if p.is_file() and not (set(rel.parts[:-1]) & _SKIP_DIRS):
            files[str(rel)] = p.read_bytes()
    if sum(len(b) for b in files.values()) > MAX_CANDIDATE_BYTES:
        raise ValueError(f"candidate {candidate} is larger than {MAX_CANDIDATE_BYTES >> 20} MiB; remove build outputs "
                         "from it.")
    return files


def unpack(root: Path, name: str, files: dict[str, bytes], single: bool) -> Path:
    """Write ``files`` under ``root/<content hash>/name`` (same content, same place: builds are reused)."""
    digest = hashlib.sha256()
    for rel, data in sorted(files.items()):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    base = root / digest.hexdigest()[:16]
    target = base / name
    for rel, data in files.items():
        dst = (base / rel) if single else (target / rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists() or dst.read_bytes() != data:
            dst.write_bytes(data)
    return target


class SuiteActor:
    """Runs on one GPU of the cluster (wrapped by ``ray.remote`` in :func:`start_actors`)."""

    def __init__(self, settings: dict[str, Any], workdir: str, gpu_index: bool) -> None:
        import ray

        from kernelpilot.evaluation import EvalSettings, Evaluator

        self.settings = EvalSettings.from_dict(settings)
        ids = ray.get_gpu_ids() if gpu_index else []
        self.gpu = int(ids[0]) if len(ids) == 1 and str(ids[0]).isdigit() else None
        node = ray.get_runtime_context().get_node_id()[:8]
        self.name = f"{node}/gpu{self.gpu if self.gpu is not None else ray.get_runtime_context().get_actor_id()[:6]}"
        self.root = Path(workdir) / self.name.replace("/", "-")
        self.evaluator = Evaluator(self.settings, workdir=self.root / "gpu", keep_warm=True, gpu=self.gpu,
                                   spare_worker=True)
        self.evaluator.allow([self.root / "inputs"])  # every job's files land there: one worker for them all
        self._local = threading.local()
        self._gpu_lock = threading.Lock()

    def evaluate(self, problem_name: str, problem: bytes, cand_name: str, cand: dict[str, bytes], single: bool,
                 mode: str, settings: dict[str, Any] | None = None) -> tuple[dict[str, Any], str | None]:
        from kernelpilot.evaluation import EvalSettings, Evaluator

        problem_path = unpack(self.root / "inputs", problem_name, {problem_name: problem}, True)
        cand_path = unpack(self.root / "inputs", cand_name, cand, single)
        builder = getattr(self._local, "evaluator", None)
        if builder is None:
            builder = self._local.evaluator = Evaluator(self.settings,
                                                        workdir=self.root / f"build-{threading.get_ident()}",
                                                        keep_warm=False, standby_builder=True)
        job_settings = EvalSettings.from_dict(settings) if settings else self.settings
        builder.settings = job_settings
        try:
            built = builder.evaluate(problem_path, cand_path, "build")
            if built.status != "ok" or mode == "build":
                built.mode = mode
                return built.to_dict(), None
            with self._gpu_lock:  # one job at a time on this GPU: its settings cannot change under it
                taken = time.monotonic()
                self.evaluator.settings = job_settings
                verdict = self.evaluator.evaluate(problem_path, cand_path, mode)
                verdict.phases["suite_slot"] = round(time.monotonic() - taken, 3)
            verdict.phases["suite_build"] = round(built.seconds, 3)
        except Exception as exc:  # noqa: BLE001
            return failed_verdict(problem_path, cand_path, mode, exc).to_dict(), None
        return verdict.to_dict(), self.name

    def close(self) -> None:
        self.evaluator.close()


class RayPool:
    """The same ``submit`` as LocalPool, over the GPUs of a Ray cluster."""

    def __init__(self, settings: Any, address: str, workdir: Path, build_workers: int = 4,
                 gpus_per_actor: float = 1.0, actors: int | None = None) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=None if address == "local" else address, ignore_reinit_error=True,
                     log_to_driver=False)
        self.ray = ray
        count = actors if actors is not None else int(ray.cluster_resources().get("GPU", 0) // gpus_per_actor)
        if count < 1:
            raise RuntimeError(f"the Ray cluster at {address} has no GPUs (resources: {ray.cluster_resources()}); "
                               "start its nodes with GPUs (`ray start --head --num-gpus N`).")
        # two concurrency groups per actor: a candidate that compiles nothing is not queued behind the CUDA
        # builds that hold the others (pool.py's quick lane)
        remote = ray.remote(num_gpus=gpus_per_actor, max_concurrency=build_workers + 1,
                            concurrency_groups={"quick": QUICK_LANE, "build": build_workers + 1})(SuiteActor)
        self.actors = [remote.remote(settings.to_dict(), str(workdir), gpus_per_actor > 0) for _ in range(count)]
        self._outstanding = [0] * count
        self._lock = threading.Lock()
        self._rr = itertools.count()
        self.stats: dict[str, SlotStats] = {}

    def submit(self, problem: Path, candidate: Path, mode: str, settings: Any = None) -> Future[SlotResult]:
        problem, candidate = Path(problem), Path(candidate)
        with self._lock:
            start = next(self._rr) % len(self.actors)
            order = sorted(range(len(self.actors)),
                           key=lambda i: (self._outstanding[i], (i - start) % len(self.actors)))
            index = order[0]
            self._outstanding[index] += 1
        lane = "quick" if compiles_nothing(candidate) else "build"
        ref = self.actors[index].evaluate.options(concurrency_group=lane).remote(problem.name, problem.read_bytes(),
                                                                                 candidate.name,
                                                 pack_candidate(candidate), candidate.is_file(), mode,
                                                 settings.to_dict() if settings is not None else None)
        future: Future[SlotResult] = Future()

        def done(inner: Future[Any]) -> None:
            with self._lock:
                self._outstanding[index] -= 1
            try:
                data, slot = inner.result()
                verdict = Verdict.from_dict(data)
            except Exception as exc:  # noqa: BLE001 - an actor that died: the job failed, the suite goes on
                verdict, slot = failed_verdict(problem, candidate, mode, exc), None
            if slot is not None:
                stats = self.stats.setdefault(slot, SlotStats(slot))
                stats.served += 1
                if len(verdict.worker_window) == 2:
                    stats.windows.append((verdict.worker_window[0], verdict.worker_window[1]))
                    stats.busy_s += max(0.0, verdict.worker_window[1] - verdict.worker_window[0])
            future.set_result(SlotResult(verdict, slot))

        ref.future().add_done_callback(done)
        return future

    def evaluate(self, problem: Any, candidate: Any, mode: str = "benchmark", **_: Any) -> Verdict:
        return self.submit(Path(problem), Path(candidate), mode).result().verdict

    async def evaluate_async(self, problem: Any, candidate: Any, mode: str = "benchmark", **_: Any) -> Verdict:
        import asyncio

        path = getattr(problem, "path", problem)
        return (await asyncio.wrap_future(self.submit(Path(path), Path(candidate), mode))).verdict

    def close(self, cancel: bool = False) -> None:
        for actor in self.actors:
            try:
                if not cancel:
                    self.ray.get(actor.close.remote(), timeout=60)
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001
                pass
        self.actors = []
