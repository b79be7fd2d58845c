"""A build process started before it is needed: Python up and torch's extension builder imported.

A build that needs torch's builder (a candidate never built, a new source file, changed flags; a
single-file candidate) spends its first seconds starting Python and importing torch: 4.8 s on our H200,
before the compiler starts. An evaluator that lives for many evaluations (a pairing session, a suite's
GPU slot) keeps one such process waiting (:class:`Standby`) and hands the next build to it.

The process takes one request, a JSON line on stdin ``{"kind", "env", "cwd", "args"}``, takes that
environment and directory as its own, runs the build exactly as the command it replaces would
(``python -m kernelpilot.extension --build ...``, the single-file builder, or a Triton candidate's
``triton_child``, whose Triton and fake tensors it imported ahead too), prints to stdout and exits.
A ``load`` request is the load check of a library ninja alone built (device_only.load_error): the
library opened with every symbol bound, torch's libraries already loaded, as the worker will open it. It
runs in its own session, so the caller's timeout kills it and its compilers as before. A caller that
goes away closes stdin, and the waiting process exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import IO, Any, NoReturn


def serve(stdin: IO[str] = sys.stdin) -> int:
    started_in = os.getcwd()
    import torch.utils.cpp_extension  # noqa: F401  # the slow part, done while nothing waits for it

    _import_triton_builder()
    line = stdin.readline()
    if not line.strip():
        return 0
    request = json.loads(line)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # torch's builder read CUDA_HOME once, at its import, from this process's first environment (where a wrapper
    # nvcc on PATH made it guess /usr/local): the build's toolkit instead, as a fresh process would have read it
    cpp = sys.modules["torch.utils.cpp_extension"]
    if request["env"].get("CUDA_HOME") and getattr(cpp, "CUDA_HOME", None) != request["env"]["CUDA_HOME"]:
        cpp.CUDA_HOME = request["env"]["CUDA_HOME"]
    if sys.path and sys.path[0] in ("", started_in):  # `-m` put the folder it started in first: the build's instead
        sys.path[0] = request["cwd"]
    if request["kind"] == LOAD:
        _load(request["args"][0])
    if request["kind"] == "directory":
        from kernelpilot.extension import main

        return main(request["args"])
    if request["kind"] == "triton":
        from kernelpilot.evaluation.build.triton_child import main as triton_main

        triton_main(request["args"])  # exits the process
    from kernelpilot.evaluation.build.single_file import SINGLE_FILE_BUILDER

    sys.argv = ["kernelpilot-single-file-builder", *request["args"]]
    exec(compile(SINGLE_FILE_BUILDER, "<single-file builder>", "exec"), {"__name__": "__main__"})
    return 0


LOAD = "load"  # the request kind of a load check
# what decides how the dynamic loader finds a library's dependencies, fixed when a process starts: a load check
# goes to the waiting process only when the check's environment has the same
LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD")


def _load(library: str) -> NoReturn:
    """Exits 0 when ``library`` opens with every symbol bound; else prints the loader's words and exits 1. It
    leaves at once (``os._exit``): the interpreter's teardown with torch and Triton imported took 0.7 s of a
    0.7 s check on our CPU machine, and the check has nothing else to finish."""
    import ctypes

    code = 0
    try:
        ctypes.CDLL(library, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        print(exc)
        code = 1
    sys.stdout.flush()
    os._exit(code)


def _import_triton_builder() -> None:
    """Triton, its compiler, torch's fake tensors and the Triton build's child, imported ahead like torch's builder:
    a Triton candidate's build otherwise spends its first seconds on them (9.4 s of a 10.4 s edit on the H100,
    2026-12-07), then 0.5 s on Triton's cache key, computed here too. No candidate code, no driver, no CUDA; the
    child confines itself after the request."""
    import kernelpilot.evaluation.build.triton_child  # noqa: F401
    import kernelpilot.problem  # noqa: F401

    try:
        import triton  # noqa: F401
        import triton.compiler  # noqa: F401
        from torch._subclasses import fake_tensor  # noqa: F401
    except ImportError:
        return  # no Triton here: its candidates' builds fail in the child, with the message, as without a standby
    import importlib

    for where in ("triton.runtime.cache", "triton.compiler.compiler"):  # its home moved between Triton versions
        try:
            key = getattr(importlib.import_module(where), "triton_key", None)
        except ImportError:
            continue
        if callable(key):  # Triton's own cache key: a hash of its installed files (0.5 s), kept for the process
            key()
            return


BUILD_NICE = 10  # KERNELPILOT_BUILD_NICE: how far builds step back for the GPU's worker (0: not at all)


def lower_priority(pid: int, env: Mapping[str, str] | None = None) -> None:
    """Give a build process (and the compilers it starts later, which inherit it) a lower CPU priority.

    Builds run on every core beside the worker that times a candidate on the GPU; a timed call whose
    launching thread waits for a core measures the compilers, not the candidate (and on the H200 worker
    starts took 52 s, once 280 s, beside 16 builds). Niced, a build still gets every core nothing else wants."""
    try:
        nice = int((env or os.environ).get("KERNELPILOT_BUILD_NICE", BUILD_NICE))
    except ValueError:
        nice = BUILD_NICE
    if nice <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, pid, max(os.getpriority(os.PRIO_PROCESS, pid), min(nice, 19)))
    except (OSError, AttributeError):
        pass  # gone already, or a platform without priorities: the build runs as it is


class Standby:
    """One builder process waiting for a request; :meth:`take` hands it over and starts the next."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None
        self._spawn()

    def _spawn(self) -> None:
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "kernelpilot.evaluation.build.standby"], env=self.env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        except OSError:
            self.proc = None
            return
        lower_priority(self.proc.pid, self.env)

    def take(self, kind: str, args: list[str], env: Mapping[str, str], cwd: str) -> subprocess.Popen[bytes] | None:
        """The waiting process, sent this build (None when it died: the caller starts one itself)."""
        proc, self.proc = self.proc, None
        self._spawn()
        if proc is None or proc.poll() is not None or proc.stdin is None:
            return None
        request: dict[str, Any] = {"kind": kind, "args": args, "env": dict(env), "cwd": cwd}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.close()
        except OSError:
            return None
        proc.stdin = None  # sent and closed: communicate() only reads its output
        return proc

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a process started in this standby's environment loads libraries as one started in ``env``
        would (the loader reads its search path once, at the start)."""
        return all(self.env.get(v, "") == env.get(v, "") for v in LOADER_VARIABLES)

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    from kernelpilot.process_exit import leave

    try:
        status = serve()
    except SystemExit as done:  # the single-file builder's own exit, or a build that raised it
        if not isinstance(done.code, (int, type(None))):
            raise
        status = done.code
    leave(status)  # no interpreter teardown once the result is printed (process_exit.py)
