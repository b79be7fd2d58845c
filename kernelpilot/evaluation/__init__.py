"""The evaluation engine: an honest verdict for one candidate kernel.

``Evaluator(settings).evaluate(problem, candidate, mode)`` runs, in order: the static policy
(policy.check_candidate), the build (build.build_candidate, in a subprocess), then one request to a
worker process (worker.py) that verifies, audits and times the candidate on the GPU, and returns a
:class:`~kernelpilot.verdict.Verdict`. This process never imports torch.cuda nor initialises CUDA.

Settings (tolerances, trials, the watchdog's allowances, limits): settings.py.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import threading
import time
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.inline_build import WorkerNames, inline_names
from kernelpilot.evaluation.settings import RULES, EvalSettings
from kernelpilot.verdict import BuildReport, Diagnostic, Environment, Finding, Verdict

MODES = ("build", "test", "benchmark")
# variables of the build environment the worker needs to import the built candidate unchanged
WORKER_BUILD_ENV = ("KERNELPILOT_BUILD_DIR", "TORCH_EXTENSIONS_DIR", "KERNELPILOT_ARCH", "CUDA_HOME", "CUDA_PATH",
                    "PATH", "TORCH_CUDA_ARCH_LIST", "CXX", "KERNELPILOT_REAL_CXX", "KERNELPILOT_PCH_DIR",
                    "KERNELPILOT_PCH")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _path_of(obj: Any) -> Path:
    if isinstance(obj, (str, os.PathLike)):
        return Path(obj)
    for attr in ("path", "root", "directory"):
        value = getattr(obj, attr, None)
        if value is not None:
            return Path(value)
    return Path(obj)


def model_file_of(candidate: Any, path: Path) -> Path:
    for attr in ("model_file", "model_path", "module_file"):
        value = getattr(candidate, attr, None)
        if value:
            p = Path(value)
            return p if p.is_absolute() else path / p
    return path / "model_new.py" if path.is_dir() else path


class Evaluator:
    """Evaluates candidates; keeps one warm worker between evaluations (``keep_warm``)."""

    def __init__(self, settings: EvalSettings | None = None, *, workdir: Path | None = None,
                 keep_warm: bool = True, gpu: int | None = None, standby_builder: bool = False,
                 spare_worker: bool = False) -> None:
        """``gpu``: the index of the GPU this evaluator's worker uses (CUDA_VISIBLE_DEVICES in the worker);
        None leaves the variable as the caller has it. Give each evaluator its own ``workdir``.
        ``standby_builder``: keep a build process waiting with torch imported (builder.py), for an
        evaluator that will build many candidates (a pairing session, a suite's build thread).
        ``spare_worker``: keep a second worker started and idle beside the warm one (with ``keep_warm``),
        so that a candidate that kills or hangs its worker costs its own evaluation and no worker start
        for the next one (a suite's GPU slot). The spare runs nothing until it takes over; its start
        (a CUDA context on the same GPU) overlaps the next evaluation."""
        self.settings = settings or EvalSettings()
        self.gpu = gpu
        if workdir is None:
            import platformdirs

            workdir = Path(platformdirs.user_cache_dir("kernelpilot")) / "eval"
        self.workdir = Path(workdir)
        self.keep_warm = keep_warm
        self._client: Any = None
        self.spare_worker = spare_worker and keep_warm
        self._spare: Any = None  # a launched worker waiting to take over (``spare_worker``)
        self._lock = threading.Lock()
        self._inline = WorkerNames()
        self._standby: Any = None  # builder.Standby, for evaluators that live for many builds
        if standby_builder:
            from kernelpilot.evaluation.build import standby_env
            from kernelpilot.evaluation.builder import Standby

            self._standby = Standby(standby_env(self._cache_env()))
        self._readable: list[Path] = []
        self._writable: list[Path] = []

    # ---- worker --------------------------------------------------------------------------------
    def _cache_env(self) -> dict[str, str]:
        import platformdirs

        cache = Path(platformdirs.user_cache_dir("kernelpilot"))
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton"),
               "KERNELPILOT_CEILINGS_DIR": str(cache / "ceilings")}
        if self.settings.build_dir:
            env["KERNELPILOT_BUILD_DIR"] = str(self.settings.build_dir)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        try:
            from kernelpilot.toolkit import find_cuda_home

            env["CUDA_HOME"] = str(find_cuda_home())
        except Exception:
            pass
        return env

    def _worker(self, readable: list[Path] | None = None, writable: list[Path] | None = None,
                wait: bool = True, phases: dict[str, float] | None = None) -> Any:
        """The worker for these paths, launched if needed; with ``wait``, up and ready. When this call
        reads a launched worker's ready message, ``phases`` gets ``worker_start`` (launch -> ready) and
        ``worker_wait`` (of that, what this call waited; the rest overlapped the build)."""
        readable = [p.resolve() for p in readable or []]
        writable_needed = [p.resolve() for p in writable or []]
        if self._client is not None and not self._client.covers(readable, writable_needed):
            self._client.stop()  # Landlock is fixed at start: a worker for the new directories
            self._client = None
        self._readable = sorted(set(self._readable) | set(readable))
        self._writable = sorted(set(self._writable) | set(writable_needed))
        readable, writable_needed = self._readable, self._writable
        if self._client is not None and not self._client.alive():
            self._take_spare(readable, writable_needed)
        if self._client is None and not self._take_spare(readable, writable_needed):
            self._client = self._new_client(readable, "worker")
        if not self._client.alive():
            self._client.launch()
        self._launch_spare()
        if wait and self._client.pending_ready:
            t0 = time.monotonic()
            self._client.wait_ready(self.settings.start_timeout_s)
            if phases is not None:
                now = time.monotonic()
                for key, seconds in (("worker_start", now - self._client.launched_at), ("worker_wait", now - t0)):
                    phases[key] = round(phases.get(key, 0.0) + seconds, 3)
        return self._client

    def _new_client(self, readable: list[Path], name: str) -> Any:
        from kernelpilot.evaluation.client import WorkerClient

        env = self._cache_env()
        writable = [Path(env[k]) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")]
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

    def close(self) -> None:
        if self._standby is not None:
            self._standby.close()
            self._standby = None
        self._stop_spare()
        self._stop_worker()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- evaluation ----------------------------------------------------------------------------
    async def evaluate_async(self, problem: Any, candidate: Any, mode: str = "benchmark", **kw: Any) -> Verdict:
        return await asyncio.to_thread(self.evaluate, problem, candidate, mode, **kw)

    def evaluate(self, problem: Any, candidate: Any, mode: str = "benchmark", *,
                 own_kernels: list[str] | None = None) -> Verdict:
        if mode not in MODES:
            raise KernelpilotError(f"unknown evaluation mode {mode!r}; use one of {', '.join(MODES)}.")
        with self._lock:
            return self._evaluate(problem, candidate, mode, own_kernels)

    def _evaluate(self, problem: Any, candidate: Any, mode: str, own_kernels: list[str] | None) -> Verdict:
        from kernelpilot.evaluation.render import summary_line

        t0 = time.monotonic()
        s = self.settings
        problem_path = _path_of(problem).resolve()
        cand_path = _path_of(candidate).resolve()
        v = Verdict(status="ok", problem=str(problem_path), candidate=str(cand_path), mode=mode, created_at=_now())
        v.environment.relaxed_rules = list(s.relaxed_policy)

        def done(status: str) -> Verdict:
            v.status = status  # type: ignore[assignment]
            v.seconds = round(time.monotonic() - t0, 3)
            v.summary = summary_line(v)
            return v

        from kernelpilot.problem import load_problem

        # a broken problem is the user's error (ProblemError, raised), not a verdict about the candidate
        problem_path = Path(load_problem(problem_path).path).resolve()
        v.problem = str(problem_path)
        cand_obj: Any = candidate
        try:
            from kernelpilot.evaluation.candidate import load_candidate

            if not hasattr(candidate, "kind"):
                cand_obj = load_candidate(cand_path)
        except KernelpilotError as exc:
            v.build = BuildReport(ok=False, diagnostics=[Diagnostic("error", str(exc), tool="python")])
            v.error = str(exc)
            return done("build_error")
        except ImportError:
            v.flags.append("candidate loader unavailable; the directory was used as given")
        model_file = model_file_of(cand_obj, cand_path)

        # 1. static policy
        try:
            from kernelpilot.evaluation.policy import check_candidate

            v.findings.extend(check_candidate(cand_path, relaxed=s.relaxed_policy))
        except ImportError:
            v.flags.append("static policy unavailable: candidate sources were not scanned")
        if any(f.severity == "reject" for f in v.findings):
            return done("rejected")

        # 2. build, in a subprocess
        kernels = list(own_kernels or [])
        worker_env: dict[str, str] = {}
        build_dirs: list[Path] = []
        try:
            from kernelpilot.evaluation.build import build_candidate, build_env
            from kernelpilot.evaluation.candidate import triton_kernels

            env = self._cache_env()
            build_dir = Path(s.build_dir) if s.build_dir else None
            benv = build_env(cand_obj, build_dir=build_dir, env=env)
            worker_env = {k: benv[k] for k in WORKER_BUILD_ENV if k in benv}
            build_dirs = [Path(benv[k]) for k in ("KERNELPILOT_BUILD_DIR", "TORCH_EXTENSIONS_DIR") if k in benv]
            if mode != "build":
                self._prestart(problem_path, model_file, build_dirs)
                self._prepare(problem_path, mode)
            report = build_candidate(cand_obj, build_dir=build_dir, timeout_s=s.build_timeout_s, env=env,
                                     problem=problem_path, standby=self._standby)
            v.build = report
            v.phases["build"] = round(report.seconds, 3)
            kernels += [k.kernel for k in report.kernels]
            kernels += [k for k in triton_kernels(cand_obj) if k not in kernels] if hasattr(cand_obj, "kind") else []
            if not report.ok:
                first = next((d.message for d in report.diagnostics if d.severity == "error"), "")
                v.error = first or report.log_tail[-2000:]
                return done("build_error")
        except ImportError:
            v.flags.append("build step unavailable: the worker built the candidate on import")
        if mode == "build":
            return done("ok")

        # 3. the worker: verify, audit, time
        timeout = s.benchmark_timeout_s if mode == "benchmark" else s.test_timeout_s
        from kernelpilot.evaluation.inductor_origin import declared_settings, within_compile_flag

        settings, declared = declared_settings(cand_obj, s.to_dict(), v)
        message = {"op": "evaluate", "problem": str(problem_path), "candidate_model": str(model_file),
                   "candidate_dir": str(cand_path if cand_path.is_dir() else cand_path.parent),
                   "mode": mode, "settings": settings, "own_kernels": kernels, "env": worker_env,
                   "warmup": getattr(cand_obj, "kind", "") == "triton"}
        names = inline_names(model_file) if getattr(cand_obj, "kind", "") == "single_file" else []
        library = worker_env.get("TORCH_EXTENSIONS_DIR", "")
        if names and self._client is not None and self._inline.conflict(self._worker_pid(), names, library):
            self._stop_worker()  # the worker holds another library under one of these names: a fresh one
        response = self._ask(message, timeout, v, build_dirs)
        if response is not None and names:
            self._inline.record(self._worker_pid(), names, library)
        if response is not None and self._reload_failed(response):
            # A warm worker that already imported another build of this extension failed to load the
            # new one: that says nothing about the candidate. Judge it in a fresh worker.
            self._stop_worker()
            response = self._ask(message, timeout, v, build_dirs)
            v.flags.append("the warm worker could not load this build; it was evaluated in a fresh worker")
        if response is None:
            return done(v.status)
        part = response.get("verdict") or {}
        merged = Verdict.from_dict({"status": part.get("status", "runtime_error"), **part})
        v.correctness, v.performance, v.speed_of_light = merged.correctness, merged.performance, merged.speed_of_light
        v.findings.extend(merged.findings)
        v.flags.extend(merged.flags)
        v.phases.update(merged.phases or {})
        if v.build is not None and "build_warmup" in v.phases:  # Triton compiled at the worker's warm-up
            v.build.seconds = round(v.build.seconds + v.phases["build_warmup"], 3)
        window = response.get("window")
        if isinstance(window, list) and len(window) == 2:
            v.worker_window = [float(window[0]), float(window[1])]
        if isinstance(response.get("busy_s"), (int, float)):
            v.phases["worker_busy"] = float(response["busy_s"])
        v.error = merged.error
        v.flags += within_compile_flag(declared, v.performance)
        if not self.keep_warm and self._client is not None:
            self._client.stop()
        elif self._client is None or not self._client.alive():
            self._prestart()  # the candidate broke the worker (CUDA error, OOM): its successor starts now
        return done(merged.status)

    def _ask(self, message: dict[str, Any], timeout: float, v: Verdict,
             writable: list[Path] | None = None) -> dict[str, Any] | None:
        """Send the request (retrying once on a fresh worker if the old one was unusable)."""
        from kernelpilot.evaluation.client import WorkerDied, WorkerTimeout

        for attempt in range(2):
            client = None
            try:
                client = self._worker([Path(message["problem"]).parent, Path(message["candidate_model"]).parent],
                                      writable, phases=v.phases)
                self._environment(v, client)
                response = client.request(message, timeout)
            except WorkerTimeout as exc:
                v.error = f"{exc}" + (f"\n--- worker log ---\n{exc.log_tail}" if exc.log_tail else "")
                v.status = "timeout"
                for phase, seconds in exc.phases.items():
                    v.phases[phase] = round(v.phases.get(phase, 0.0) + seconds, 3)
                # the worker was executing the request (its own watch frames) until it was killed
                v.phases["worker_busy"] = round(sum(t for p, t in exc.phases.items() if p != "request"), 3)
                if exc.call:
                    v.flags.append(f"watchdog: {exc.call} (phase {exc.phase}) did not return within "
                                   f"{exc.allow_s:.1f} s; the worker was killed and replaced")
                if self.keep_warm:  # the next evaluation finds a healthy worker already starting
                    self._prestart(Path(message["problem"]), Path(message["candidate_model"]), writable or [])
                return None
            except WorkerDied as exc:
                v.error = f"{exc}" + (f"\n--- worker log ---\n{exc.log_tail}" if exc.log_tail else "")
                v.status = "runtime_error"
                if self.keep_warm and client is not None and client.served:  # it died serving: start its successor
                    self._prestart()
                return None
            if response.get("ok"):
                return response
            if attempt == 0 and response.get("exit"):
                continue  # the previous candidate left the worker unusable: start a fresh one
            v.error, v.status = str(response.get("error", "the worker refused the request")), "runtime_error"
            return None
        return None

    def baselines(self, problem: Any, *, readable: list[Path] | None = None) -> Any:
        """Eager and torch.compile times of ``problem`` on this GPU and its floor at the measured ceilings
        (worker op ``baselines``, see baselines.py); a ``Baselines``. ``readable``: directories later
        evaluations read (e.g. the worktree), so that warm worker serves them too. Raises KernelpilotError
        when the worker cannot measure them (no GPU, the problem fails on the GPU, no answer in time)."""
        from kernelpilot.evaluation.baselines import Baselines
        from kernelpilot.evaluation.client import WorkerFailure
        from kernelpilot.problem import load_problem

        path = Path(load_problem(_path_of(problem)).path).resolve()
        message = {"op": "baselines", "problem": str(path), "settings": self.settings.to_dict()}
        with self._lock:
            try:
                client = self._worker([path.parent, *(readable or [])])
                response = client.request(message, self.settings.benchmark_timeout_s)
            except WorkerFailure as exc:
                raise KernelpilotError(f"the baselines were not measured: {exc}") from None
        if not response.get("ok"):
            raise KernelpilotError(f"the baselines were not measured: {response.get('error', 'the worker refused')}")
        return Baselines.from_dict(response["baselines"])

    def _reload_failed(self, response: dict[str, Any]) -> bool:
        part = response.get("verdict") or {}
        if part.get("status") != "runtime_error" or self._client is None or self._client.served < 2:
            return False
        error = str(part.get("error", ""))
        return any(m in error for m in ("ExtensionBuildError", "ImportError", "undefined symbol",
                                         "already registered", "generic_type"))

    def _environment(self, v: Verdict, client: Any) -> None:
        env = dict(client.environment)
        confinement = list(client.confinement) + [c for c in env.get("confinement", []) if c not in client.confinement]
        relaxed = v.environment.relaxed_rules
        v.environment = Environment(**{k: env.get(k, "") for k in ("gpu", "sm", "driver", "torch", "cuda", "python",
                                                                   "hostname_hash")})
        v.environment.confinement, v.environment.relaxed_rules = confinement, relaxed


__all__ = ["EvalSettings", "Evaluator", "Finding", "MODES", "RULES"]
