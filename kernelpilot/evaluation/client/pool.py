"""The evaluator's worker processes: the warm worker that serves its requests, and the spare.

A mixin of :class:`~kernelpilot.evaluation.Evaluator`: it launches the worker (client.py) with the
paths it may read and write (its confinement is fixed at start), replaces it when it dies, and, for
an evaluator with ``spare_worker``, keeps a second one started and idle to take over at once.
Workers die with the thread that launched them: call these from the thread that owns the evaluator.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kernelpilot.evaluation.sandbox import bytecode
from kernelpilot.evaluation.sandbox.build_step import caches_of


class WorkerOwner:
    """Worker management for Evaluator (its attributes are set in Evaluator.__init__)."""

    settings: Any
    gpu: int | None
    workdir: Path
    keep_warm: bool
    spare_worker: bool
    last_worker_start_s: float  # the last launched worker's start, launch -> ready (0.0 before one is measured)
    last_worker_start_steps: dict[str, float]  # ... step by step (protocol.start_steps)
    _client: Any
    _spare: Any
    _readable: list[Path]
    _writable: list[Path]

    # ---- worker --------------------------------------------------------------------------------
    def _cache_env(self) -> dict[str, str]:
        import platformdirs

        cache = Path(platformdirs.user_cache_dir("kernelpilot"))
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton"),
               "KERNELPILOT_CEILINGS_DIR": str(cache / "ceilings"), "CUTE_DSL_CACHE_DIR": str(cache / "cute"),
               # Inductor compiles in the worker's own process: its subprocess pool failed inside the confined
               # worker on an H100, 2026-12-06 (SubprocException for kernels not yet in Triton's cache)
               "TORCHINDUCTOR_COMPILE_THREADS": "1", **bytecode.env_for()}
        if self.settings.build_dir:
            env["KERNELPILOT_BUILD_DIR"] = str(self.settings.build_dir)
        env.update(getattr(self, "worker_env", {}) or {})
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        from kernelpilot.evaluation.worker import crash_frames as native_trace

        if str(self.settings.device).startswith("cuda"):  # one timing at a time on this GPU (gpu_lock.py)
            from kernelpilot.evaluation.timing import gpu_lock

            env[gpu_lock.ENV] = str(gpu_lock.lock_path(cache, gpu_lock.gpu_key(self.gpu)))
        trace = native_trace.library(cache / "native")
        if trace is not None:  # native frames in the log of a worker that crashes
            env[native_trace.ENV] = str(trace)
        try:
            from kernelpilot.toolkit import find_cuda_home

            env["CUDA_HOME"] = str(find_cuda_home())
        except Exception:
            pass
        return env

    def _worker(self, readable: list[Path] | None = None, writable: list[Path] | None = None,
                wait: bool = True, phases: dict[str, float] | None = None) -> Any:
        """The worker for these paths, launched if needed; with ``wait``, up and ready. When this call
        reads a launched worker's ready message, ``phases`` gets ``worker_start`` (launch -> up, by the worker's
        clock: a spare taken long after it came up counts its start only) and ``worker_wait`` (what this call
        waited; the rest overlapped the build)."""
        readable = [p.resolve() for p in readable or []]
        writable_needed = [p.resolve() for p in writable or []]
        if self._client is not None and not self._client.covers(readable, writable_needed):
            self._client.stop()  # Landlock is fixed at start: a worker for the new directories
            self._client = None
        self._readable = sorted(set(self._readable) | set(readable))
        self._writable = sorted(set(self._writable) | set(writable_needed))
        readable, writable_needed = self._readable, self._writable
        if (self._client is None or not self._client.alive()) and not self._take_spare(readable, writable_needed):
            if self._client is None:
                self._client = self._new_client(readable, "worker")
        if not self._client.alive():
            self._client.launch()
        self._launch_spare()
        if wait and self._client.pending_ready:
            t0 = time.monotonic()
            self._client.wait_ready(self.settings.start_timeout_s)
            if phases is not None:
                up, launched = self._client.ready_at, self._client.launched_at  # by the worker's clock
                for key, seconds in (("worker_start", up - launched), ("worker_wait", max(0.0, up - t0))):
                    phases[key] = round(phases.get(key, 0.0) + seconds, 3)
                self.last_worker_start_s = up - launched  # what replacing a worker costs (a cancel's grace)
                self.last_worker_start_steps = dict(getattr(self._client, "start_steps", {}) or {})
        return self._client

    def _new_client(self, readable: list[Path], name: str) -> Any:
        from kernelpilot.evaluation.client.process import WorkerClient

        env = self._cache_env()
        writable = caches_of(env)
        writable.append(Path(env.get("KERNELPILOT_BUILD_DIR") or Path(env["TRITON_CACHE_DIR"]).parent / "builds"))
        writable += [p for p in self._writable if p not in writable]
        writable.append(Path(env["KERNELPILOT_CEILINGS_DIR"]))
        for p in writable:
            p.mkdir(parents=True, exist_ok=True)
        return WorkerClient(self.workdir, device=self.settings.device, confine=self.settings.confine,
                            extra_env=env, writable=writable, readable=readable, name=name)

    def _take_spare(self, readable: list[Path], writable: list[Path]) -> bool:
        """Replace a dead or missing worker by the spare, when one is running and may reach these paths."""
        spare, self._spare = self._spare, None
        if spare is None:
            return False
        if not spare.alive() or not spare.covers(readable, writable):
            spare.stop()
            return False
        if self._client is not None:
            self._client.stop()
        self._client = spare
        return True

    def _launch_spare(self) -> None:
        """Start the spare worker (``spare_worker``) when there is none; from the thread that owns the worker."""
        if not self.spare_worker or self._client is None:
            return
        if self._spare is not None and self._spare.alive():
            return
        name = "worker" if getattr(self._client, "name", "worker") != "worker" else "worker-spare"
        self._spare = self._new_client(self._readable, name)
        try:
            self._spare.launch()
        except Exception:  # noqa: BLE001 - no spare: the next replacement starts a worker the usual way
            self._spare = None

    def _prestart(self, problem: Path | None = None, model_file: Path | None = None,
                  writable: list[Path] = ()) -> bool:  # type: ignore[assignment]
        """Launch the worker (torch import, CUDA init: seconds) so it comes up while the build runs.

        Only the spawn happens here, in the calling thread; its ready message is read by the next
        request. False when a warm worker already covers these paths or the launch failed.
        """
        if self._client is not None and self._client.alive():
            return False
        try:
            self._worker([p.parent for p in (problem, model_file) if p is not None], list(writable), wait=False)
        except Exception:  # noqa: BLE001 - the request starts it again and reports the failure
            return False
        return True

    def start_worker(self) -> bool:
        """Launch the worker now, for the paths allowed so far (``allow``), without waiting for it: call it
        from the long-lived thread that will use this evaluator (the worker dies with the thread that
        spawned it). False when one is already running."""
        return self._prestart()

    def allow(self, readable: list[Path], writable: list[Path] = ()) -> None:  # type: ignore[assignment]
        """Paths the worker may read (and write) from its start, besides each evaluation's own: a caller that
        knows every problem and candidate up front (a suite) saves a worker restart per new directory."""
        self._readable = sorted(set(self._readable) | {Path(p).resolve() for p in readable})
        self._writable = sorted(set(self._writable) | {Path(p).resolve() for p in writable})

    def _prepare(self, problem: Path, mode: str) -> None:
        """Have the worker load the problem (and compile the baseline) while the candidate builds."""
        client = self._client
        if client is not None and client.alive() and client.covers([problem.parent]):
            client.prepare({"problem": str(problem), "mode": mode, "settings": self.settings.to_dict()})

    def _worker_pid(self) -> int | None:
        proc = getattr(self._client, "proc", None)
        return proc.pid if proc is not None and proc.poll() is None else None

    def _stop_worker(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client = None

    def _stop_spare(self) -> None:
        if self._spare is not None:
            self._spare.stop()
            self._spare = None
