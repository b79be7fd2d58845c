"""The evaluation worker: ``python -m kernelpilot.evaluation.worker --in-fd R --out-fd W``.

Everything that touches CUDA runs here, never in the caller. Requests and responses travel as JSON
frames on two dedicated pipes (protocol.py); fd 1 and 2 point at a log file, so candidate prints never
corrupt the protocol. Start-up order: import torch, initialise the device, capture the timer and
checker functions (the integrity baseline), then apply the confinement the caller described in
``KERNELPILOT_SANDBOX`` (Landlock and seccomp on itself), then announce ``ready``. Candidate code is
only imported after that.

Why CUDA starts first: on our H200 (driver 580, 2026-11-30) CUDA cannot initialise under either
layer — the Landlock file rules or the seccomp socket filter — and fails with error 304 (measured:
network/PID namespaces alone are fine). The cost: Landlock binds only the calling thread and threads
it starts later, so the few driver threads CUDA starts during initialisation are not bound by the
file rules (the seccomp filter is synchronised to every thread). The verdict says so.
``KERNELPILOT_SANDBOX_ORDER=before-cuda`` confines first, for machines where CUDA starts confined.

The reference model, its float64 copy and the torch.compile baseline are cached per problem while the worker
stays warm. A CUDA error, OOM, patched harness function or stray thread makes the worker answer with
``exit: true`` and leave; the caller starts a fresh one next time. The engine (pipeline.py, timing/candidate.py,
baselines/measure.py) uses the worker through the protocols of interface.py.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import hashlib
import importlib.util
import os
import platform
import socket
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import kernelpilot.evaluation.protocol as protocol
import kernelpilot.evaluation.supersede as supersede
import kernelpilot.problem  # noqa: F401 - imported before the integrity baseline, as everything the harness uses
from kernelpilot.evaluation.audit.identities import Identities
from kernelpilot.evaluation.baselines.measure import answer as baselines_answer
from kernelpilot.evaluation.baselines.measure import check_answer
from kernelpilot.evaluation.build import load_inline as inline_build
from kernelpilot.evaluation.correctness import verify  # noqa: F401 - imported before the integrity baseline
from kernelpilot.evaluation.correctness.compare import warm_comparison
from kernelpilot.evaluation.correctness.inputs import draw_inputs
from kernelpilot.evaluation.sandbox.confine import apply_from_env
from kernelpilot.evaluation.settings import settings_of
from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.timing.ceilings import Ceilings, gpu_identity
from kernelpilot.evaluation.timing.ceilings import get as get_ceilings
from kernelpilot.evaluation.timing.interleaved import Pristine
from kernelpilot.evaluation.worker import compile_hook, global_state, memory, start_steps, watchdog
from kernelpilot.evaluation.worker import crash_frames as native_trace
from kernelpilot.evaluation.worker.cuda_errors import CUDA_MARKERS
from kernelpilot.evaluation.worker.pipeline import run_candidate
from kernelpilot.evaluation.worker.profiled import profiled
from kernelpilot.evaluation.worker.problem_state import (  # noqa: F401 - the worker's names, as before the split
    CandidateError,
    ProblemCache,
    ProblemState,
    ProblemTooLarge,
    compile_failure,
    gpu_shared_backend,
    kernelbench_failure,
)

if TYPE_CHECKING:
    import torch

# a candidate's own compile that failed: built on import without the build step (extension.py), or a
# load_inline the worker ran (compile_hook.py); the verdict is build_error and the worker is kept
_BUILD_ERRORS = ("ExtensionBuildError", "InlineBuildError")


def _sandbox() -> list[str]:
    """Apply the confinement the caller described in $KERNELPILOT_SANDBOX (Landlock, seccomp) to itself."""
    if not os.environ.get("KERNELPILOT_SANDBOX"):
        return []
    return [f"worker applied: {', '.join(apply_from_env()) or 'nothing'}"]  # raises when it cannot: no candidate runs


class Worker(ProblemCache):
    def __init__(self, device: str, confinement: list[str] | None = None) -> None:
        self.start_steps = start_steps.StartSteps()  # what the start's seconds went to (in the ready message)
        self.device = device
        start_steps.start_torch(device, self.start_steps)  # torch, CUDA and the harness's imports settled
        # the harness's own modules are imported at the top of this one, before any of this
        inline_build.install_import_once()  # before the integrity baseline: the harness's own, not a patch
        compile_hook.install()  # a load_inline in __init__ or forward: build time, its call's deadline paused
        compile_hook.install_dynamo()  # a torch.compile in the candidate: the same

        self.initial_state = global_state.Snapshot.take()  # torch's switches before any candidate
        self.identities = Identities()
        self.start_steps.mark("integrity_baseline")
        self.pristine = Pristine.capture() if device.startswith("cuda") else None
        self.start_steps.mark("timer_capture")
        self.ceilings: Ceilings | None = None
        self.ceilings_note = ""
        if device.startswith("cuda"):  # measured (first time on this GPU) before any candidate code is loaded
            try:
                self.ceilings = get_ceilings(device)
            except Exception as exc:
                self.ceilings_note = f"ceilings unavailable ({type(exc).__name__}: {exc})"
            self.start_steps.mark("ceilings")
        self.confinement = list(confinement or [])
        self.problems: dict[str, ProblemState] = {}
        self.count = 0
        self.count_imported = -1  # the last candidate whose module imported (KernelBench's "compiled")
        self.dynamo_reset = False
        self.untidy = False  # an answer was sent and its clean-up (tidy) has not run yet

    # ---- environment ---------------------------------------------------------------------------
    def environment(self) -> dict[str, Any]:
        import torch

        env = {"torch": torch.__version__, "cuda": str(torch.version.cuda or ""), "python": platform.python_version(),
               "hostname_hash": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:12],
               "confinement": self.confinement}
        if self.device.startswith("cuda"):
            major, minor = torch.cuda.get_device_capability()
            name, driver, _ = gpu_identity(torch.device(self.device).index or 0)
            env.update(gpu=name, driver=driver, sm=f"sm_{major}{minor}")
        else:
            env.update(gpu="cpu (test mode)", sm="")
        return env

    # ---- problem cache -------------------------------------------------------------------------
    def prepare(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Load the problem and, for a benchmark, compile the torch.compile baseline, ahead of the
        evaluation request (sent while the candidate builds). Failures are left for the evaluation to report."""
        s = settings_of(msg)
        watchdog.begin(watchdog.Allowance.from_settings(s))
        try:
            watchdog.step("problem")
            state = self.problem_state(msg["problem"], int(s.seed))
            warm_comparison(state.dtype, self.device)
            if msg.get("mode") == "benchmark" and self.device.startswith("cuda") and s.compile_baseline:
                watchdog.step("compile_baseline")
                self.compiled(state, s.compile_mode,
                              lambda: draw_inputs(state.module, int(s.seed) + 500, "normal", self.device))
        except Exception as exc:  # noqa: BLE001 - the evaluation request meets the same error and reports it
            return {"ok": False, "op": protocol.PREPARED, "error": f"{type(exc).__name__}: {exc}"[:600]}
        return {"ok": True, "op": protocol.PREPARED}

    # ---- candidate -----------------------------------------------------------------------------
    def import_candidate(self, model_file: str) -> ModuleType:
        self.count += 1
        self._importing = self.count
        path = Path(model_file).resolve()
        name = f"kp_candidate_{self.count}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CandidateError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        inline_build.before_import(path)
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        if not hasattr(module, "ModelNew"):
            raise CandidateError(f"{path.name} defines no class ModelNew")
        self.count_imported = self.count
        return module

    def build_model(self, module: ModuleType, state: ProblemState, seed: int) -> tuple[torch.nn.Module, str]:
        """ModelNew(*init_inputs), seeded as Model was, and how its weights were made equal to Model's:
        ``by name`` when every parameter and buffer of Model has a same-named, same-shaped counterpart in
        ModelNew (copied), else ``by seed`` (KernelBench's way: both built after the same seed; a candidate
        that renames or derives its parameters must create them in Model's order)."""
        import torch

        torch.manual_seed(seed)
        try:
            model = module.ModelNew(*state.init_inputs)
        except BaseException as exc:
            try:  # KernelBench's status depends on where it raised (problem_state.kernelbench_failure)
                exc.kernelpilot_stage = "construct"  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass
            raise
        if not isinstance(model, torch.nn.Module):
            raise CandidateError(f"ModelNew(...) returned a {type(model).__name__}, not a torch.nn.Module")
        want, have = state.reference.model.state_dict(), model.state_dict()
        same = all(k in have and tuple(have[k].shape) == tuple(v.shape) for k, v in want.items())
        how = "by seed"
        if same and want:
            with torch.no_grad():
                for name, value in want.items():
                    have[name].copy_(value)
            how = "by name"
        elif not want:
            how = "none (Model has no parameters or buffers)"
        return model.to(self.device).eval(), how

    # ---- one evaluation ------------------------------------------------------------------------
    def evaluate(self, msg: dict[str, Any]) -> dict[str, Any]:
        tainted = self.identities.findings("by an earlier candidate")
        if tainted:
            return {"ok": False, "exit": True, "error": "worker integrity check failed; restarting"}
        # the build's variables (CXX, PATH, TORCH_EXTENSIONS_DIR, ...) for this request only: the harness's
        # own work between requests (a benchmark's torch.compile in "prepare") runs in the worker's start-up env
        self._env_before = dict(os.environ)
        for key, value in (msg.get("env") or {}).items():
            os.environ[str(key)] = str(value)
        result: dict[str, Any] = {"status": "ok", "findings": [], "flags": [], "error": ""}
        exit_after = False
        try:
            result.update(run_candidate(self, msg))
            exit_after = bool(result.pop("exit", False))
        except BaseException as exc:  # the candidate's failure becomes the verdict
            if isinstance(exc, KeyboardInterrupt):
                raise
            if isinstance(exc, supersede.Superseded):  # a newer save: no verdict, and nothing wrong
                result.update(status=supersede.SUPERSEDED, error="", findings=[], flags=[
                    "superseded: a newer save cancelled this evaluation; the worker stayed warm"])
                return self._after(result, False)
            message, fatal = self.classify(exc)
            build_failed = type(exc).__name__ in _BUILD_ERRORS
            status = "problem_too_large" if isinstance(exc, ProblemTooLarge) else (
                "build_error" if build_failed else "runtime_error")
            result.update(status=status, error=message)
            kb = kernelbench_failure(msg, self.count_imported == self.count, message,
                                      constructing=getattr(exc, "kernelpilot_stage", "") == "construct",
                                      runtime=isinstance(exc, RuntimeError))
            if kb is not None:
                result["kernelbench"] = kb
            if message.startswith("CUDA out of memory"):
                result["memory"] = memory.report(str(exc))
                result["error"] = f"{message}\n{memory.describe(result['memory'])}"
            exit_after = fatal
        return self._after(result, exit_after)

    def _after(self, result: dict[str, Any], exit_after: bool) -> dict[str, Any]:
        """The answer, once the candidate's modules and variables are dropped; the rest of the clean-up (``tidy``)
        runs after the answer is sent, before the next request is read."""
        for name in [n for n in sys.modules if n.startswith("kp_candidate_")]:
            sys.modules.pop(name, None)
        before = getattr(self, "_env_before", None)
        if before is not None:
            os.environ.clear()
            os.environ.update(before)
        if self.identities.changed():
            exit_after = True
        self.untidy = not exit_after
        return {"ok": True, "verdict": result, "exit": exit_after}

    def tidy(self) -> bool:
        """Whatever the candidate left behind goes, between its answer and the next request (the caller builds the
        next candidate meanwhile: a garbage collection of the worker's heap took 0.1-0.15 s of each verdict when it
        ran before the answer, H100 2026-12-06). False: the process must not serve again (its state could not be
        set back, or something the harness uses changed), and it leaves; the next request finds it gone and is
        judged in a fresh worker."""
        if not self.untidy:
            return True
        import torch

        self.untidy = False
        # the candidate's objects held in reference cycles (a bound method it keeps, a compiled forward) go now:
        # a __del__ that sets torch's switches "back" runs before the state is restored, not in the next candidate
        gc.collect()
        try:
            self.initial_state.apply()  # whatever the candidate switched, the next one starts from the default
        except Exception:  # noqa: BLE001 - a state torch refuses to set back: never reuse this process
            return False
        if self.device.startswith("cuda"):
            try:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001 - a poisoned context: never reuse this process
                return False
        return not self.identities.changed()

    def classify(self, exc: BaseException) -> tuple[str, bool]:
        import torch

        text = f"{type(exc).__name__}: {exc}"
        tb = "".join(traceback.format_exception(exc)[-8:])
        if isinstance(exc, (CandidateError, ProblemTooLarge)) or type(exc).__name__ in _BUILD_ERRORS:
            return str(exc), False
        if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text.lower():
            return f"CUDA out of memory: {str(exc).splitlines()[0][:300]}", True
        if any(m in text for m in CUDA_MARKERS):
            return f"CUDA error (the context is poisoned): {text[:600]}", True
        return f"{text[:600]}\n{tb[-2000:]}", not self.cuda_healthy()

    def cuda_healthy(self) -> bool:
        if not self.device.startswith("cuda"):
            return True
        import torch

        try:
            torch.empty(1, device=self.device).fill_(1)
            torch.cuda.synchronize()
            return True
        except Exception:
            return False


def main(argv: list[str] | None = None) -> int:
    start_steps.MAIN_AT[0] = time.monotonic()
    parser = argparse.ArgumentParser(prog="python -m kernelpilot.evaluation.worker")
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--cancel-fd", type=int, default=-1)  # ids of superseded requests (supersede.py)
    parser.add_argument("--device", default=os.environ.get("KERNELPILOT_EVAL_DEVICE", "cuda"))
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash in native code leaves the Python stack in the log, hence in the verdict
    native_trace.install()  # and the native frames before it (library + offset of each)
    gpu_lock.current()  # opened before the confinement; the descriptor is kept for the worker's life
    if args.cancel_fd >= 0:
        supersede.install(supersede.CancelPipe(args.cancel_fd))
    try:
        worker = _start(args.device, args.out_fd)
    except Exception as exc:
        traceback.print_exc()
        protocol.send(args.out_fd, {"op": "ready", "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return 3
    return _serve(worker, args.in_fd, args.out_fd)


def _start(device: str, out_fd: int) -> Worker:
    """The worker, confined (before or after CUDA starts) and watched, once it has announced ``ready``."""
    late = os.environ.get("KERNELPILOT_SANDBOX_ORDER", "after-cuda") != "before-cuda"
    confinement = [] if late else _sandbox()  # before torch exists here: see the module docstring
    worker = Worker(device, confinement)
    if late and (applied := _sandbox()):
        worker.confinement = applied + [
            "confined after CUDA start-up: CUDA's driver threads are not bound by the Landlock file rules"]
    sync = worker.pristine.synchronize if worker.pristine is not None else None
    watchdog.install(watchdog.Watchdog(lambda frame: protocol.send(out_fd, frame), sync))
    environment = worker.environment()
    # start-up's 300,000 objects (torch, dynamo) leave the collector's scans (``tidy``: 0.1-0.3 s a collection);
    # no problem or candidate exists yet, so nothing that could later be cyclic garbage (a GPU tensor) is frozen
    gc.freeze()
    worker.start_steps.mark("confine_and_announce")
    protocol.send(out_fd, {"op": "ready", "ok": True, "pid": os.getpid(), "environment": environment,
                           "ready_at": time.monotonic(),  # the system-wide clock the client reads too
                           "main_at": start_steps.MAIN_AT[0], "start_steps": worker.start_steps.steps,
                           "heap_frozen": gc.get_freeze_count()})
    return worker


def _serve(worker: Worker, in_fd: int, out_fd: int) -> int:
    """Answer requests until the caller closes the pipe or asks the worker to leave."""
    prepared_s = 0.0
    while True:
        try:
            msg = protocol.recv(in_fd)
        except protocol.ProtocolError:
            return 0
        op = msg.get("op")
        if op == "shutdown":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # nothing to clean up; interpreter teardown can crash in a candidate's native code
        if op == "ping":
            protocol.send(out_fd, {"ok": True, "pid": os.getpid(), "time": time.time()})
        elif op == "prepare":
            started = time.time()
            answer = worker.prepare(msg)
            prepared_s += time.time() - started
            protocol.send(out_fd, answer)
        elif op in ("evaluate", "baselines", "compiled_check"):
            started = time.time()
            # eager and torch.compile timed before any candidate, torch.compile's own check: baselines/measure.py
            answer = baselines_answer if op == "baselines" else check_answer
            response = profiled(_evaluate, worker, msg) if op == "evaluate" else \
                supersede.cancellable(lambda m: answer(worker, m), msg)
            response["window"] = [started, time.time()]
            # this evaluation's GPU work: the request, and its preparation (problem, baseline) before it
            response["busy_s"] = round(prepared_s + response["window"][1] - started, 3)
            if prepared_s:  # the problem loaded (and the baseline compiled) ahead: the verdict's "prepare" phase
                response["prepare_s"] = round(prepared_s, 3)
            prepared_s = 0.0
            sys.stdout.flush()
            sys.stderr.flush()
            protocol.send(out_fd, response)
            if response.get("exit") or not worker.tidy():
                os._exit(0)  # a poisoned CUDA context may hang a normal interpreter shutdown
        else:
            protocol.send(out_fd, {"ok": False, "error": f"unknown op {op!r}"})


def _evaluate(worker: Worker, msg: dict[str, Any]) -> dict[str, Any]:
    return supersede.cancellable(worker.evaluate, msg)


if __name__ == "__main__":
    sys.exit(main())
