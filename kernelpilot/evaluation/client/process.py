"""The caller's handle on one evaluation worker process (no torch, no CUDA in this process).

The worker runs ``python -m kernelpilot.evaluation.worker`` in its own process group (session), with
a scrubbed environment, the confinement part's command prefix (network/PID namespaces) and pre-exec
limits when available, and its fd 1/2 redirected to a log file. Each request has a wall-clock limit;
past it the whole process group is killed and the caller gets ``WorkerTimeout``. A worker that dies
(segfault, abort, CUDA error exit) raises ``WorkerDied`` with the signal and the log tail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kernelpilot.evaluation.protocol as protocol
from kernelpilot.evaluation.client.failures import (
    WorkerDied,
    WorkerFailure,
    WorkerTimeout,
    describe_exit,
)
from kernelpilot.evaluation.sandbox import confine
from kernelpilot.evaluation.supersede import CancelToken
from kernelpilot.redact import redact

LOG_TAIL_LINES = 80  # a native crash: its frames (native_trace.py), then the Python stack


WORKER_CPUS = "KERNELPILOT_WORKER_CPUS"  # the cores a worker is started on (kernelpilot.suite.cores)


def _on_cores(cores: list[int], then: Callable[[], None] | None) -> Callable[[], None]:
    def preexec() -> None:
        os.sched_setaffinity(0, cores)
        if then is not None:
            then()

    return preexec


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


class WorkerClient:
    def __init__(self, workdir: Path, *, device: str = "cuda", confine: bool = True,
                 extra_env: dict[str, str] | None = None, writable: list[Path] | None = None,
                 readable: list[Path] | None = None, name: str = "worker") -> None:
        self.workdir = Path(workdir)
        self.name = name
        self.device = device
        self.confine = confine
        self.extra_env = dict(extra_env or {})
        self.writable = [Path(p) for p in (writable or [])]
        self.readable = [Path(p).resolve() for p in (readable or [])]
        self._sb: Any = None
        self._marker: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.environment: dict[str, Any] = {}
        self.confinement: list[str] = []
        self.log_path = self.workdir / f"{name}.log"
        self._to_worker: int | None = None
        self._from_worker: int | None = None
        self._cancel_w: int | None = None  # the worker's --cancel-fd: ids of superseded requests (supersede.py)
        self.in_flight: int | None = None  # the id of the request being answered, while ``request`` waits
        self._log_offset = 0
        self.starts = 0
        self.pending_ready = False  # launched, ready message not read yet
        self.launched_at = 0.0
        self.ready_at = 0.0
        self.start_steps: dict[str, float] = {}  # the last start's steps (protocol.start_steps)
        self.heap_frozen = 0
        self.served = 0  # requests sent to the current worker process
        self._unanswered_prepares = 0  # "prepare" requests whose answer has not been read yet

    # ---- lifecycle -----------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _sandbox(self, env: dict[str, str]) -> tuple[list[str], dict[str, str], Any, list[str]]:
        """(command prefix, env, preexec_fn, description) from confine.py, or plain fallbacks."""
        if not self.confine:
            return [], env, None, ["unconfined (confinement turned off)"]
        try:  # a sandbox this machine cannot make (no Landlock, no namespaces) runs unconfined, and says so
            self._sb = confine.WorkerSandbox(
                writable=[self.workdir, *self.writable],
                readable=[Path(_package_root()), *self.readable, *confine.compiler_read_paths(env)],
                private_tmp=self.workdir / "private", base_env=env,
                # a warm worker lives for many evaluations: each request has a wall-clock limit instead
                limits=confine.ResourceLimits(cpu_s=None),
                extra_env={k: v for k, v in env.items() if k in self.extra_env})
            merged = self._sb.env()
            for key in ("KERNELPILOT_EVAL_DEVICE", "PYTHONUNBUFFERED"):
                merged[key] = env[key]
            self._marker = merged.get(getattr(confine, "MARKER_ENV", ""), None)
            return list(self._sb.command_prefix()), merged, self._sb.preexec(), list(self._sb.description())
        except (confine.ConfinementError, OSError, RuntimeError, ValueError) as exc:  # said in the verdict
            return [], env, None, [f"unconfined (sandbox unavailable: {type(exc).__name__}: {exc})"]

    def covers(self, readable: list[Path], writable: list[Path] = ()) -> bool:  # type: ignore[assignment]
        """Whether the running worker may read / write these paths (Landlock is fixed when it starts)."""
        if not self.confine:
            return True

        def inside(p: Path, roots: list[Path]) -> bool:
            return any(p == r or r in p.parents for r in roots)

        write_roots = [self.workdir.resolve(), *[w.resolve() for w in self.writable]]
        return (all(inside(p, self.readable + write_roots) for p in readable)
                and all(inside(p, write_roots) for p in writable))

    def _env(self) -> dict[str, str]:
        env = confine.scrubbed_env()
        env.update(self.extra_env)
        env["KERNELPILOT_EVAL_DEVICE"] = self.device
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("PATH", os.environ.get("PATH", os.defpath))
        return env

    def start(self, timeout: float = 180.0) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Spawn the worker without waiting for it to come up (``wait_ready`` does).

        Call it from a long-lived thread: the worker's die-with-parent signal fires when the spawning
        *thread* exits, so spawning from a helper thread would kill the worker with that thread.
        """
        self.stop()
        self.served = 0
        self._unanswered_prepares = 0
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        prefix, env, preexec, self.confinement = self._sandbox(self._env())
        new_session = preexec is None
        cores = self.extra_env.get(WORKER_CPUS, "")
        if cores:  # before the interpreter starts: every thread and child of the worker stays on them
            preexec = _on_cores(sorted({int(c) for c in cores.split(",")}), preexec)
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        cancel_r, cancel_w = os.pipe()
        cmd = [*prefix, sys.executable, "-m", "kernelpilot.evaluation.worker",
               "--in-fd", str(req_r), "--out-fd", str(resp_w), "--cancel-fd", str(cancel_r), "--device", self.device]
        if self.log_path.exists() and self.log_path.stat().st_size > 16 << 20:
            self.log_path.unlink()  # candidates may print a lot; only the tail of the latest run matters
        log = open(self.log_path, "ab")
        self._log_offset = self.log_path.stat().st_size
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         pass_fds=(req_r, resp_w, cancel_r), env=env, cwd=str(self.workdir),
                                         start_new_session=new_session, preexec_fn=preexec)
        except BaseException:
            os.close(cancel_w)
            raise
        finally:
            log.close()
            os.close(req_r)
            os.close(resp_w)
            os.close(cancel_r)
        self._to_worker, self._from_worker, self._cancel_w = req_w, resp_r, cancel_w
        self.starts += 1
        self.launched_at = time.monotonic()
        self.pending_ready = True

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Wait for the launched worker's ready message (torch imported, CUDA up, confined)."""
        if not self.pending_ready:
            return
        self.pending_ready = False
        try:
            ready = self._receive(timeout)
        except WorkerFailure as exc:
            raise WorkerDied(f"the evaluation worker did not start: {exc}", exc.log_tail) from None
        if not ready.get("ok"):
            tail = self.log_tail()
            self.stop()
            raise WorkerDied(f"the evaluation worker did not start: {ready.get('error', 'unknown error')}", tail)
        self.environment = dict(ready.get("environment") or {})
        self.heap_frozen = int(ready.get("heap_frozen") or 0)  # objects start-up left out of the collector's scans
        now = time.monotonic()
        try:  # when the worker was up: a spare launched long before it was taken was ready long before it was read
            self.ready_at = min(max(float(ready.get("ready_at", now)), self.launched_at), now)
        except (TypeError, ValueError):
            self.ready_at = now
        self.start_steps = protocol.start_steps(ready, self.launched_at, self.ready_at)


    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                if self._to_worker is not None:
                    protocol.send(self._to_worker, {"op": "shutdown"})
                proc.wait(timeout=5)
            except Exception:
                self._kill(proc)
        for fd in (self._to_worker, self._from_worker, self._cancel_w):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_worker = self._from_worker = self._cancel_w = None

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            confine.kill_process_group(proc, marker=self._marker)
        except OSError:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    # ---- requests ------------------------------------------------------------------------------
    def log_tail(self, since_request: bool = True) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                if since_request:
                    fh.seek(self._log_offset)
                data = fh.read()[-64 * 1024:]
        except OSError:
            return ""
        text = data.decode("utf-8", errors="replace")
        return redact("\n".join(text.splitlines()[-LOG_TAIL_LINES:]))  # never a secret in a verdict's log

    def _kill_and_stop(self) -> str:
        proc = self.proc
        if proc is not None:
            self._kill(proc)
        tail = self.log_tail()
        self.stop()
        return tail

    def _died(self) -> WorkerDied:
        proc = self.proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill(proc)
        tail = self.log_tail()
        self.stop()
        return WorkerDied(describe_exit(code), tail)

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self._from_worker is not None
        try:
            return protocol.recv(self._from_worker, timeout=timeout)
        except protocol.FrameTimeout:
            tail = self._kill_and_stop()
            raise WorkerTimeout(f"no answer within {timeout:.0f} s; the worker was killed", tail) from None
        except protocol.ProtocolError:
            raise self._died() from None

    def prepare(self, message: dict[str, Any]) -> bool:
        """Send a "prepare" request without waiting (the worker loads the problem, compiles the baseline):
        its answer is skipped by the next ``request``. False when it could not be sent."""
        if not self.alive() or self._to_worker is None:
            return False
        try:
            protocol.send(self._to_worker, {**message, "op": "prepare"})
        except OSError:
            return False
        self._unanswered_prepares += 1
        return True

    def _follow(self, limit: float, started: float,
                interim: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Read frames until the answer. Each watch frame sets the deadline for what the worker does next
        (the call it is about to make, and how long that may take); past it, or past ``limit`` seconds
        from ``started``, the worker is killed."""
        assert self._from_worker is not None
        overall = started + limit
        deadline, phase, call, allow = overall, "request", "waiting for the worker", limit
        phase_started, phases = time.monotonic(), {}
        while True:
            now = time.monotonic()
            try:
                frame = protocol.recv(self._from_worker, timeout=max(min(deadline, overall) - now, 0.0))
            except protocol.FrameTimeout:
                now = time.monotonic()
                phases[phase] = round(phases.get(phase, 0.0) + now - phase_started, 3)
                tail = self._kill_and_stop()
                if now >= overall - 0.05:
                    what = f"the evaluation ran past its {limit:.0f} s limit"
                else:
                    what = f"{call} did not finish within its {allow:.1f} s allowance"
                raise WorkerTimeout(f"{what} (phase {phase}); the worker was killed", tail, phase=phase,
                                    call=call, allow_s=allow, phases=phases) from None
            except protocol.ProtocolError:
                died = self._died()
                died.phase, died.call = phase, call
                raise died from None
            if frame.get("op") == protocol.WATCH:
                now = time.monotonic()
                if frame.get("phase") != phase:
                    phases[phase] = round(phases.get(phase, 0.0) + now - phase_started, 3)
                    phase_started = now
                phase, call = str(frame.get("phase", phase)), str(frame.get("call", call))
                allow = float(frame.get("allow_s", limit))
                deadline = now + allow
                continue
            if frame.get("op") == protocol.TESTED:  # a staged benchmark's test verdict, before its timing
                if interim is not None:
                    interim(frame)
                continue
            if frame.get("op") == protocol.PREPARED and self._unanswered_prepares > 0:
                self._unanswered_prepares -= 1
                continue
            return frame

    def request(self, message: dict[str, Any], timeout: float, cancel: CancelToken | None = None,
                grace_s: float | None = 1.0,
                interim: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Send one request and wait for its answer, following the worker's watch frames (the hang
        watchdog); ``timeout`` bounds the whole request. ``cancel`` (supersede.CancelToken): when it is
        cancelled the worker stops at its next announcement, or is killed ``grace_s`` later (None: never)."""
        if not self.alive():
            raise WorkerDied("the worker is not running")
        self.wait_ready()  # launched but not yet read its ready message
        assert self._to_worker is not None
        try:
            self._log_offset = self.log_path.stat().st_size
        except OSError:
            self._log_offset = 0
        started = time.monotonic()
        self.served += 1
        message = {**message, "request_id": self.served}
        self.in_flight = self.served
        remove = cancel.on_cancel(lambda: self.cancel(grace_s=grace_s)) if cancel is not None else None
        try:
            try:
                protocol.send(self._to_worker, message)
            except OSError:
                return self._receive(1.0)
            response = self._follow(timeout, started, interim)
        finally:
            self.in_flight = None
            if remove is not None:
                remove()
        response.setdefault("seconds", time.monotonic() - started)
        if response.get("exit"):
            proc = self.proc
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._kill(proc)
            self.stop()
        return response

    # ---- superseded requests (supersede.py) ----------------------------------------------------
    def cancel(self, request_id: int | None = None, grace_s: float | None = None) -> int | None:
        """From any thread: the worker stops the request in flight (or ``request_id`` and every one before
        it) at its next watchdog announcement and answers ``superseded``; with ``grace_s``, a worker still
        answering it that much later is killed. The id cancelled, or None."""
        import threading

        rid = request_id if request_id is not None else self.in_flight
        fd = self._cancel_w
        if rid is None or fd is None:
            return None
        try:
            os.write(fd, f"{rid}\n".encode())
        except OSError:
            return None
        if grace_s is not None:
            timer = threading.Timer(grace_s, self.kill_if_serving, args=(rid, self.starts))
            timer.daemon = True
            timer.start()
        return rid

    def kill_if_serving(self, request_id: int, starts: int | None = None) -> bool:
        """From any thread: kill the worker (its process group) if it is still answering ``request_id``:
        a superseded request that did not stop within its grace period. The waiting ``request`` then
        raises WorkerDied, which the evaluator knows to be this kill, not a crash."""
        proc = self.proc
        if self.in_flight != request_id or proc is None or proc.poll() is not None:
            return False
        if starts is not None and starts != self.starts:  # ids start again in each new worker process
            return False
        self._kill(proc)
        return True
