"""The evaluation pipeline, on the caller's side: an honest verdict for one candidate kernel.

``Evaluator(settings).evaluate(problem, candidate, mode)`` runs, in order: the static policy
(static/policy.py), the build (build/step.py, in a subprocess), then one request to a worker process
(worker/) that verifies, audits and times the candidate on the GPU, and returns a
:class:`~kernelpilot.verdict.Verdict`. Every step runs or the evaluation fails: none is skipped because a part
of kernelpilot did not import. This process never imports torch.cuda nor initialises CUDA.

Settings (tolerances, trials, the watchdog's allowances, limits): settings.py.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.assembly import Evaluation, merge_response
from kernelpilot.evaluation.baselines.session import SessionBaselines
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.build.builder_notes import ARCH_LIST_TOOL
from kernelpilot.evaluation.build.device_only import DEVICE_ONLY, SassCheck, sass_wait
from kernelpilot.evaluation.build.load_inline import WorkerNames, inline_names
from kernelpilot.evaluation.build.standby import Standby
from kernelpilot.evaluation.build.step import (
    build_candidate,
    build_env,
    standby_env,
)
from kernelpilot.evaluation.candidate import (
    Candidate,
    CandidateRef,
    ProblemRef,
    cuda_kernel_names,
    cute_kernels,
    load_candidate,
    path_of,
    triton_kernels,
)
from kernelpilot.evaluation.client.requests import WorkerRequests
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.static.declarations import (
    declared_settings,
    runs_torch_compile_libraries,
    within_compile_flag,
)
from kernelpilot.evaluation.static.policy import check_candidate
from kernelpilot.evaluation.static.training import forward_only_flag
from kernelpilot.evaluation.supersede import CancelToken
from kernelpilot.kb_files import check as check_problem_files
from kernelpilot import toolchain_probe
from kernelpilot.problem import load_problem
from kernelpilot.verdict import BuildReport, Diagnostic, Finding, Verdict

MODES = ("build", "test", "benchmark")
# how a device-only build's kernels failing to take the full build's place shows in a worker's error
REPLACEMENT_FAILURES = ("ReplacementError", "the edited kernels could not be loaded", "invalid device function",
                        "named symbol not found")
# variables of the build environment the worker needs to import the built candidate unchanged
WORKER_BUILD_ENV = ("KERNELPILOT_BUILD_DIR", "TORCH_EXTENSIONS_DIR", "KERNELPILOT_ARCH", "CUDA_HOME", "CUDA_PATH",
                    "PATH", "TORCH_CUDA_ARCH_LIST", "CXX", "KERNELPILOT_REAL_CXX", "KERNELPILOT_PCH_DIR",
                    "KERNELPILOT_PCH", "KERNELPILOT_CANDIDATE_DIR", "KERNELPILOT_DEVICE_BUILDS")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def model_file_of(candidate: Candidate, path: Path) -> Path:
    for attr in ("model_file", "model_path", "module_file"):
        value = getattr(candidate, attr, None)
        if value:
            p = Path(value)
            return p if p.is_absolute() else path / p
    return path / "model_new.py" if path.is_dir() else path


class Evaluator(SessionBaselines, WorkerRequests):
    """Evaluates candidates; keeps one warm worker between evaluations (``keep_warm``)."""

    def __init__(self, settings: EvalSettings | None = None, *, workdir: Path | None = None,
                 keep_warm: bool = True, gpu: int | None = None, standby_builder: bool = False,
                 spare_worker: bool = False, worker_env: dict[str, str] | None = None) -> None:
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
        self.worker_env = dict(worker_env or {})  # variables for this evaluator's workers only
        if workdir is None:
            workdir = Path(platformdirs.user_cache_dir("kernelpilot")) / "eval"
        self.workdir = Path(workdir)
        self.keep_warm = keep_warm
        self._client: Any = None
        self.spare_worker = spare_worker and keep_warm
        self._spare: Any = None  # a launched worker waiting to take over (``spare_worker``)
        self._lock = threading.Lock()
        self._token: CancelToken | None = None  # of the evaluation in flight
        self._init_baselines()  # this session's, and a save's deferral of them (baselines/session.py)
        # a superseded worker request that has not stopped this long after the cancel: the worker is killed. None:
        # what replacing it would cost (its measured start, 1-10 s; client/requests.py cancel_grace)
        self.cancel_grace_s: float | None = None
        self.last_worker_start_s = 0.0
        self.last_worker_start_steps: dict[str, float] = {}
        self._inline = WorkerNames()
        self._standby: Standby | None = None  # for evaluators that live for many builds
        if standby_builder:
            self._standby = Standby(standby_env(self._cache_env()))
        self._readable: list[Path] = []
        self._writable: list[Path] = []
        self._death_phase = ""  # what the last worker that died was doing
        self._device_builds = True  # False while a benchmark is judged again on a full build

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
    async def evaluate_async(self, problem: ProblemRef, candidate: CandidateRef, mode: str = "benchmark",
                             **kw: Any) -> Verdict:
        return await asyncio.to_thread(self.evaluate, problem, candidate, mode, **kw)

    def evaluate(self, problem: ProblemRef, candidate: CandidateRef, mode: str = "benchmark", *,
                 own_kernels: list[str] | None = None, baseline: Baselines | None = None,
                 on_tested: Callable[[Verdict], None] | None = None) -> Verdict:
        """``baseline``: the problem's ``Baselines`` measured once by a BaselineService (a suite): the
        worker then compiles nothing and compares the candidate with its torch.compile time. ``on_tested`` (a
        benchmark): called, in this thread, with the candidate's test verdict as soon as the worker has verified
        and audited it, before the timing; the benchmark does not verify it again (a pairing session draws the
        test verdict at once). Not called where that verdict would not be a test request's own (the candidate
        failed, times itself, compiled inside the worker, or the rules are KernelBench's)."""
        if mode not in MODES:
            raise KernelpilotError(f"unknown evaluation mode {mode!r}; use one of {', '.join(MODES)}.")

        with self._lock:
            self._evaluation_begins()
            self._token = token = CancelToken()
            try:
                return self._evaluate(problem, candidate, mode, own_kernels, baseline, token, on_tested)
            finally:
                self._token = None

    def cancel(self) -> bool:
        """From any thread: the evaluation in flight ends as ``superseded`` (a newer save replaces it): its
        build is killed, or its worker request stops at the worker's next announcement and the worker stays
        warm (killed and replaced if it does not stop within its grace, ``cancel_grace``; not counted as a crash).
        False when nothing was in flight. A session's baselines are not an evaluation: ``defer_baselines``."""
        token = self._token
        if token is None:
            return False
        token.cancel()
        return True

    def _evaluate(self, problem: ProblemRef, candidate: CandidateRef, mode: str, own_kernels: list[str] | None,
                  baseline: Baselines | None = None, token: CancelToken | None = None,
                  on_tested: Callable[[Verdict], None] | None = None) -> Verdict:
        run = self._begin(problem, candidate, mode, own_kernels, baseline, token)
        run.on_tested = on_tested if mode == "benchmark" else None
        try:
            cand_obj = candidate if isinstance(candidate, Candidate) else load_candidate(run.cand_path)
        except KernelpilotError as exc:
            run.v.build = BuildReport(ok=False, diagnostics=[Diagnostic("error", str(exc), tool="python")])
            run.v.error = str(exc)
            return run.done("build_error")
        run.cand_obj, run.model_file = cand_obj, model_file_of(cand_obj, run.cand_path)
        # 1. the static policy: a security boundary, never skipped
        run.v.findings.extend(check_candidate(run.cand_path, relaxed=self.settings.relaxed_policy,
                                              rules=self.settings.ruleset, problem=run.problem_path))
        if any(f.severity == "reject" for f in run.v.findings):
            return run.done("rejected")
        if run.cancelled:
            return run.done("superseded")
        # 2. the build, in a subprocess
        stopped = self._build(run)
        if stopped:
            return run.done(stopped)
        if mode == "build" or run.cancelled:
            return run.done("superseded" if run.cancelled else "ok")
        # 3. the worker: verify, audit, time
        return self._judge_in_worker(run)

    def _begin(self, problem: ProblemRef, candidate: CandidateRef, mode: str, own_kernels: list[str] | None,
               baseline: Baselines | None, token: CancelToken | None) -> Evaluation:
        s = self.settings
        cand_path = path_of(candidate).resolve()
        v = Verdict(status="ok", problem=str(path_of(problem).resolve()), candidate=str(cand_path), mode=mode,
                    created_at=_now())
        v.environment.relaxed_rules = list(s.relaxed_policy)
        # a broken problem is the user's error (ProblemError, raised), not a verdict about the candidate
        problem_path = Path(load_problem(path_of(problem).resolve()).path).resolve()
        v.problem = str(problem_path)
        if s.ruleset.harness is not None:  # KernelBench's score is faithful on the files its generations were for
            warning = check_problem_files([problem_path], s.ruleset.harness.version)["warning"]
            if warning:
                v.flags.append("problem file: " + warning)
        return Evaluation(v=v, settings=s, mode=mode, problem_path=problem_path, cand_path=cand_path,
                          problem_arg=problem, candidate_arg=candidate, own_kernels=own_kernels,
                          kernels=list(own_kernels or []), baseline=baseline, token=token)

    def _build(self, run: Evaluation) -> str:
        """The build step; "" when the evaluation goes on, else the status it ends with."""
        s, v, cand_obj = self.settings, run.v, run.candidate
        env = self._cache_env()
        build_dir = Path(s.build_dir) if s.build_dir else None
        benv = build_env(cand_obj, build_dir=build_dir, env=env)
        run.worker_env = {k: benv[k] for k in WORKER_BUILD_ENV if k in benv}
        if cand_obj.kind in ("directory", "single_file"):  # the worker loads the build with its toolchain choices
            run.worker_env[toolchain_probe.HANDED] = toolchain_probe.handed(benv)
        run.build_dirs = [Path(benv[k]) for k in ("KERNELPILOT_BUILD_DIR", "TORCH_EXTENSIONS_DIR") if k in benv]
        if run.mode != "build":
            self._prestart(run.problem_path, run.model_file, run.build_dirs)
            self._prepare(run.problem_path, run.mode)  # a benchmark's torch.compile is compiled while this builds
        sass = SassCheck(benv) if run.mode != "build" else None  # its compile starts once the parts are planned
        try:
            report = build_candidate(cand_obj, build_dir=build_dir, timeout_s=s.build_timeout_s, env=env,
                                     problem=run.problem_path, standby=self._standby, cancel=run.token,
                                     confine=s.confine, device_only=self._device_builds,
                                     on_device_plan=sass.start if sass else None)
            if sass is not None and report.ok and report.command.startswith(DEVICE_ONLY):
                sass.begin(Path(report.build_dir))
                run.sass_check = sass
        finally:  # a build that failed, was superseded, took the full build or raised: its check's compile goes
            if sass is not None and run.sass_check is not sass:
                sass.stop()
        v.build = report
        v.phases["build"] = round(report.seconds, 3)
        for d in report.diagnostics:
            if d.tool == ARCH_LIST_TOOL:
                v.findings.append(Finding(rule="arch-list", severity="warn", evidence=d.message[:200],
                                          message=d.message))
        if run.cancelled:  # the build was killed by the cancel: not the candidate's doing
            return "superseded"
        run.kernels += [k.kernel for k in report.kernels]
        run.kernels += [k for k in triton_kernels(cand_obj) if k not in run.kernels]
        run.kernels += [k for k in cute_kernels(cand_obj) if k not in run.kernels]
        run.kernels += [k for k in cuda_kernel_names(cand_obj) if k not in run.kernels]
        if not report.ok:
            first = next((d.message for d in report.diagnostics if d.severity == "error"), "")
            v.error = first or report.log_tail[-2000:]
            return "build_error"
        return ""

    def _request(self, run: Evaluation) -> tuple[dict[str, Any], dict[str, Any]]:
        """The worker request of this evaluation, and the candidate's declarations."""
        cand_obj = run.candidate
        settings, declared = declared_settings(cand_obj, self.settings, run.v)
        message: dict[str, Any] = {
            "op": "evaluate", "problem": str(run.problem_path), "candidate_model": str(run.model_file),
            "candidate_dir": str(run.cand_path if run.cand_path.is_dir() else run.cand_path.parent),
            "mode": run.mode, "settings": settings.to_dict(), "own_kernels": run.kernels, "env": run.worker_env,
            "warmup": cand_obj.kind in ("triton", "cute"), "kind": cand_obj.kind,
            "inductor_libraries": runs_torch_compile_libraries(declared, settings)}
        if run.baseline is not None and run.mode == "benchmark":
            message["baseline"] = run.baseline.to_dict()
        if run.on_tested is not None:
            message["stage_test"] = True
        return message, declared

    @staticmethod
    def _interim(run: Evaluation) -> Callable[[dict[str, Any]], None] | None:
        """What a staged benchmark's test-verdict frame goes through: ``run.on_tested``, given the test verdict."""
        on_tested = run.on_tested
        if on_tested is None:
            return None

        def tested(frame: dict[str, Any]) -> None:
            try:
                on_tested(run.tested(frame))
            except Exception as exc:  # noqa: BLE001 - the caller's drawing must not end the benchmark
                run.v.flags.append(f"the test verdict could not be shown before the timing ({type(exc).__name__})")

        return tested

    def _judge_in_worker(self, run: Evaluation) -> Verdict:
        s, v, mode, token = self.settings, run.v, run.mode, run.token
        timeout = s.benchmark_timeout_s if mode == "benchmark" else s.test_timeout_s
        message, declared = self._request(run)
        names = inline_names(run.model_file) if run.candidate.kind == "single_file" else []
        library = run.worker_env.get("TORCH_EXTENSIONS_DIR", "")
        if names and self._client is not None and self._inline.conflict(self._worker_pid(), names, library):
            self._stop_worker()  # the worker holds another library under one of these names: a fresh one
        response = self._ask_once_more_if_it_died(message, timeout, v, run.build_dirs, token, self._interim(run))
        if response is not None and names:
            self._inline.record(self._worker_pid(), names, library)
        if response is not None and self._reload_failed(response) and not run.cancelled:
            # A warm worker that already imported another build of this extension failed to load the
            # new one: that says nothing about the candidate. Judge it in a fresh worker.
            self._stop_worker()
            response = self._ask(message, timeout, v, run.build_dirs, token, self._interim(run))
            v.flags.append("the warm worker could not load this build; it was evaluated in a fresh worker")
        if response is None:
            return run.done(v.status)
        merged = merge_response(v, response)
        v.flags += within_compile_flag(declared, v.performance) + forward_only_flag(run.model_file, v.performance)
        if run.sass_check is not None and merged.status == "runtime_error" and self._device_builds \
                and any(m in str(merged.error) for m in REPLACEMENT_FAILURES):
            # the edited kernels did not load or launch in place of the full build's: not the candidate's doing
            return self._judge_on_full_build(run, f"failed to load or launch ({str(merged.error)[:160]})")
        if run.sass_check is not None and v.build is not None:
            final = sass_wait(mode, v.performance is not None) is None
            waited = time.monotonic()
            v.build.sass_check = run.sass_check.wait(sass_wait(mode, v.performance is not None))
            if final:  # what the verdict waited for the check, and the check's own seconds
                v.phases["sass_wait"] = round(time.monotonic() - waited, 3)
                v.phases["sass_check"] = run.sass_check.seconds
            if mode == "benchmark" and v.build.sass_check.startswith("differs"):
                return self._judge_on_full_build(run, v.build.sass_check)
        if not self.keep_warm and self._client is not None:
            self._client.stop()
        elif self._client is None or not self._client.alive():
            self._prestart()  # the candidate broke the worker (CUDA error, OOM): its successor starts now
        return run.done(merged.status)

    def prebuild(self, candidate: CandidateRef) -> BuildReport | None:
        """Build ``candidate`` now, with no verdict (a pairing session at launch: its first save then builds
        only what the save changed). Never raises; None when the candidate cannot be loaded."""
        try:
            cand = candidate if isinstance(candidate, Candidate) else load_candidate(path_of(candidate).resolve())
            return build_candidate(cand, build_dir=Path(self.settings.build_dir) if self.settings.build_dir else None,
                                   timeout_s=self.settings.build_timeout_s, env=self._cache_env(),
                                   standby=self._standby, confine=self.settings.confine)
        except KernelpilotError:
            return None

    def _judge_on_full_build(self, run: Evaluation, why: str) -> Verdict:
        """A benchmark whose device-only build's kernels differ from a full build's (or failed to load): judged
        again on a full build (what lands is the full build's code)."""
        self._device_builds = False
        try:
            verdict = self._evaluate(run.problem_arg, run.candidate_arg, run.mode, run.own_kernels, run.baseline,
                                     run.token)
        finally:
            self._device_builds = True
        verdict.flags.append(f"judged on a full build: the device-only build's kernels {why}")
        return verdict
