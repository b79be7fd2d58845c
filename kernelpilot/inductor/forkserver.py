"""The preloading fork server of ``recorder.record_all`` (its client: forkclient.py).

``python -m kernelpilot.inductor.forkserver FD [MODULE ...]`` imports torch, Inductor, Triton and what
generate.py needs (``PRELOAD``; or the modules named) once, without initialising CUDA, then forks one
child per request read from the socket FD. Each child is what ``python -m kernelpilot.inductor.generate``
(or ``python SCRIPT``) would have been, minus the imports:

- its own session (``os.setsid``: pgid == pid, so the client's ``killpg`` on a timeout kills it and its
  grandchildren), default SIGINT/SIGTERM/SIGCHLD handlers, stdin from /dev/null, stdout and stderr into
  the files the request names, the request's working directory and environment (os.environ replaced,
  so ``getenv`` in C sees it too: CUDA_VISIBLE_DEVICES is read when the child initialises CUDA);
- the server's sockets, selector and pidfds closed (nothing else is open: the server is started with
  ``close_fds``);
- RNGs reseeded as a new interpreter has them (``random``'s, numpy's, torch's CPU generator: a fresh
  seed each); dynamo reset; sys.argv and sys.path[0] as ``python -m``/``python
  SCRIPT`` set them; then the module or script runs as ``__main__`` (runpy) and the child leaves with
  ``os._exit`` (its exit code; 1 after an uncaught exception, printed as Python would).

Before each fork the server checks that no thread but its main one exists (Python's or native:
/proc/self/task), that torch has not initialised CUDA and that the CUDA driver, if loaded, was never
initialised (``cuDeviceGetCount`` answers CUDA_ERROR_NOT_INITIALIZED); otherwise the request is refused
with the reason, and the client runs that problem in a subprocess.

Environment read at import: Inductor's, dynamo's and functorch's configs read their TORCHINDUCTOR_*,
TORCHDYNAMO_*, TORCH_* variables when imported (TORCHINDUCTOR_COMPILE_THREADS, _FX_GRAPH_CACHE,
_AUTOGRAD_CACHE among them), torch's logging reads TORCH_LOGS, OpenMP/OpenBLAS read OMP_NUM_THREADS &c.
when loaded, the interpreter PYTHON*: these must be set in the server's environment (record_all starts
it with the recording environment), and a request whose value of any of them (``IMPORT_TIME``) differs
from the server's is refused. Everything else (CUDA_*, KERNELPILOT_*, TRITON_CACHE_DIR is TRITON_ and so
compared too) is applied per child.

Protocol (JSON lines): server -> ``{"ready": bool, "reason", "pid", "import_s"}`` once; client ->
``{"op": "fork", "id", "argv", "env", "cwd", "stdout", "stderr"}`` -> ``{"id", "pid"}`` or ``{"id",
"error"}``; client -> ``{"op": "kill", "pid"}`` (SIGKILL to the group while the child is not reaped);
server -> ``{"exit": pid, "returncode"}`` when a child ends (its group is SIGKILLed first, while the pid
is still held: stragglers die and no reused pid is hit). EOF or SIGTERM: every live child's group is
killed and reaped, and the server exits.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import random
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.utils",
           "torch._inductor.output_code", "torch._inductor.codecache", "torch._inductor.runtime.benchmarking",
           "triton", "triton.language", "kernelpilot.inductor.generate", "kernelpilot.inductor.helpers",
           "kernelpilot.inductor.facts", "kernelpilot.problem")
IMPORT_TIME = ("TORCH", "PYTORCH", "INDUCTOR", "TRITON", "OMP_", "MKL_", "OPENBLAS_", "GOTO_", "PYTHON", "LD_")
CUDA_ERROR_NOT_INITIALIZED = 3


def fork_hazard() -> str | None:
    """Why forking now would be unsafe (a thread, CUDA initialised), or None."""
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        return f"Python threads running in the fork server: {', '.join(others)}"
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    if len(tasks) > 1:
        return f"{len(tasks) - 1} native threads running in the fork server (a library's thread pool: OMP_NUM_THREADS?)"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "torch initialised CUDA in the fork server"
    return _driver_initialised()


def _driver_initialised() -> str | None:
    """The CUDA driver, when some import loaded it, must not have been initialised (cuInit)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "libcuda.so" in line}
    except OSError:
        return None
    for path in sorted(p for p in paths if os.path.basename(p).startswith("libcuda.so")):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            count = ctypes.c_int(0)
            rc = lib.cuDeviceGetCount(ctypes.byref(count))
        except (OSError, AttributeError):
            continue
        if rc != CUDA_ERROR_NOT_INITIALIZED:
            return f"the CUDA driver ({path}) was initialised in the fork server (cuDeviceGetCount returned {rc})"
    return None


def env_mismatch(startup: dict[str, str], wanted: dict[str, str]) -> str | None:
    """A variable read at import whose requested value differs from the server's."""
    for key in sorted(set(startup) | set(wanted)):
        if key.startswith(IMPORT_TIME) and startup.get(key) != wanted.get(key):
            return (f"{key}={wanted.get(key)!r} but the fork server imported with {key}={startup.get(key)!r} "
                    "(read at import: set it in the server's environment)")
    return None


class Server:
    def __init__(self, sock: socket.socket, startup_env: dict[str, str]) -> None:
        self.sock = sock
        self.startup_env = startup_env
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ, None)
        self.live: dict[int, int | None] = {}  # pid -> its pidfd (None without pidfd_open)
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def serve(self) -> None:
        while True:
            polling = any(fd is None for fd in self.live.values())
            for key, _ in self.selector.select(timeout=0.1 if polling else None):
                if key.data is None:
                    chunk = self.sock.recv(1 << 16)
                    if not chunk:
                        return
                    self.buffer += chunk
                    while b"\n" in self.buffer:
                        line, self.buffer = self.buffer.split(b"\n", 1)
                        self.handle(json.loads(line))
                else:
                    self.reap(key.data)
            if polling:
                for pid in [p for p, fd in self.live.items() if fd is None]:
                    if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:  # not reaped
                        self.reap(pid)

    def handle(self, request: dict[str, Any]) -> None:
        if request.get("op") == "kill":
            pid = int(request["pid"])
            if pid in self.live:  # not reaped yet: the pid (and so the group id) cannot have been reused
                _killpg(pid)
            return
        why = fork_hazard() or env_mismatch(self.startup_env, request["env"])
        if why:
            self.send({"id": request["id"], "error": why})
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # never back into the server's loop
            code = 70
            try:
                code = self.child(request)
            finally:
                os._exit(code)
        pidfd: int | None = None
        try:
            pidfd = os.pidfd_open(pid)
            self.selector.register(pidfd, selectors.EVENT_READ, pid)
        except (AttributeError, OSError):
            pidfd = None
        self.live[pid] = pidfd
        self.send({"id": request["id"], "pid": pid})

    def reap(self, pid: int) -> None:
        _killpg(pid)  # the child is a zombie still holding its pid: only its own group's stragglers die
        _, status = os.waitpid(pid, 0)
        fd = self.live.pop(pid)
        if fd is not None:
            self.selector.unregister(fd)
            os.close(fd)
        self.send({"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})

    def shutdown(self) -> None:
        for pid in list(self.live):
            _killpg(pid)
        for pid in list(self.live):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def child(self, request: dict[str, Any]) -> int:
        """In the forked child: become what a fresh recording process would be, run the target."""
        try:
            os.setsid()
            for fd in [fd for fd in self.live.values() if fd is not None]:
                os.close(fd)
            self.selector.close()
            self.sock.close()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for signum in (signal.SIGTERM, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            _redirect(0, os.devnull, os.O_RDONLY)
            _redirect(1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            _redirect(2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            _reseed()
            if "torch._dynamo" in sys.modules:
                sys.modules["torch._dynamo"].reset()
            gc.unfreeze()
        except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
            traceback.print_exc()
            _flush()
            return 70
        return run_target(list(request["argv"]))


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _redirect(fd: int, path: str, flags: int) -> None:
    new = os.open(path, flags, 0o600)
    if new != fd:
        os.dup2(new, fd)
        os.close(new)


def _reseed() -> None:
    """The RNG state of a new interpreter: random's, numpy's and torch's default generator from a fresh
    random seed (torch 2.14 seeds a new process's generator so too; the CUDA generators are made by the
    child's own CUDA initialisation)."""
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.random.default_generator.seed()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def run_target(argv: list[str]) -> int:
    """``python -m MODULE ARGS`` (argv ``["-m", MODULE, *ARGS]``) or ``python SCRIPT ARGS``, in-process;
    returns the exit code the interpreter would have had."""
    import runpy
    import warnings

    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            # the module may be preloaded (generate.py is): running it again as __main__ is what -m does
            warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter prints an uncaught exception
        traceback.print_exc()
        code = 1
    _flush()
    return code


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the client, which closes the server

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    startup_env = dict(os.environ)
    started = time.monotonic()
    name = ""
    try:
        for name in argv[1:] or PRELOAD:
            importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - reported: the client falls back to subprocesses
        sock.sendall((json.dumps({"ready": False, "reason": f"preloading {name}: {type(exc).__name__}: {exc}"})
                      + "\n").encode())
        return 1
    gc.collect()
    gc.freeze()  # the preloaded objects stay out of the collector: fewer pages copied in each child
    why = fork_hazard()
    sock.sendall((json.dumps({"ready": why is None, "reason": why, "pid": os.getpid(),
                              "import_s": round(time.monotonic() - started, 3)}) + "\n").encode())
    if why:
        return 1
    server = Server(sock, startup_env)
    try:
        server.serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
