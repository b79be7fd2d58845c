"""record_all's side of the fork server (forkserver.py): start it, ask it for a child, wait for the child's
exit (the server is its parent: it reaps and reports the exit code), kill the child's group on a timeout.

``run_forked`` is ``recorder._run`` for a forked child: the same ``(stdout, stderr, returncode,
timed_out)``, stdout and stderr through files instead of pipes, ``-9`` after a timeout. A request the
server refuses (a thread appeared, an import-time variable differs) or a server that is gone raises
``ForkServerError`` before any child exists: the caller runs that problem in a subprocess instead.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

DISABLE = "KERNELPILOT_RECORD_FORK"  # "0": every recording in a subprocess of its own, as before the server


class ForkServerError(RuntimeError):
    pass


@dataclass
class _Wait:
    event: threading.Event = field(default_factory=threading.Event)
    value: dict[str, Any] = field(default_factory=dict)


def fork_argv(command: Sequence[str]) -> list[str] | None:
    """What the server runs for ``command`` (``[python, -m, MODULE, ...]`` or ``[python, SCRIPT.py, ...]``
    with this interpreter), or None when only a subprocess can run it."""
    if len(command) < 2 or os.path.abspath(command[0]) != os.path.abspath(sys.executable):
        return None
    if command[1] == "-m" and len(command) > 2:
        return list(command[1:])
    if command[1].endswith(".py") and os.path.isfile(command[1]):
        return list(command[1:])
    return None


class ForkServer:
    """One preloading fork server; thread-safe (record_all's workers share it)."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, info: dict[str, Any]) -> None:
        self.proc, self.sock, self.info = proc, sock, info
        self.lock = threading.Lock()
        self.next_id = 0
        self.replies: dict[int, _Wait] = {}
        self.children: dict[int, _Wait] = {}
        self.dead: str | None = None
        self.reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self.reader.start()

    @classmethod
    def start(cls, env: dict[str, str], preload: Sequence[str] = (), timeout: float = 180.0) -> ForkServer:
        """Start the server with ``env`` (the variables read at import among them) and wait until it has
        imported ``preload`` (forkserver.PRELOAD when empty); ForkServerError when it cannot serve."""
        mine, theirs = socket.socketpair()
        log = tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "kernelpilot.inductor.forkserver", str(theirs.fileno()),
                                     *preload], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=log, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        mine.settimeout(timeout)
        line = b""
        try:
            while not line.endswith(b"\n"):
                chunk = mine.recv(1 << 16)
                if not chunk:
                    break
                line += chunk
        except TimeoutError:
            pass
        info: dict[str, Any] = json.loads(line) if line.endswith(b"\n") else {}
        if not info.get("ready"):
            proc.kill()
            proc.wait()
            mine.close()
            log.seek(0)
            tail = "\n".join(log.read().decode(errors="replace").strip().splitlines()[-6:])
            reason = info.get("reason") or (f"no answer within {timeout:g} s" if proc.returncode == -9 else
                                            f"exited {proc.returncode}")
            raise ForkServerError(f"the fork server did not start: {reason}" + (f"\n{tail}" if tail else ""))
        log.close()
        mine.settimeout(None)
        return cls(proc, mine, info)

    def _read(self) -> None:
        buffer = b""
        try:
            while chunk := self.sock.recv(1 << 16):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self._dispatch(json.loads(line))
        except (OSError, ValueError):
            pass
        with self.lock:
            self.dead = self.dead or "the fork server exited"
            waits = list(self.replies.values()) + list(self.children.values())
        for wait in waits:
            wait.event.set()

    def _dispatch(self, message: dict[str, Any]) -> None:
        with self.lock:
            if "id" in message:
                if "pid" in message:  # before its exit can be read: wait() always finds it
                    self.children[int(message["pid"])] = _Wait()
                wait = self.replies.pop(int(message["id"]), None)
            else:
                wait = self.children.get(int(message["exit"]))
        if wait is not None:
            wait.value.update(message)
            wait.event.set()

    def _send(self, message: dict[str, Any]) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def spawn(self, argv: list[str], env: dict[str, str], stdout: Path, stderr: Path, timeout: float = 60.0) -> int:
        """Fork a child running ``argv`` (see fork_argv); its pid."""
        wait = _Wait()
        with self.lock:
            if self.dead:
                raise ForkServerError(self.dead)
            self.next_id += 1
            self.replies[self.next_id] = wait
            try:
                self._send({"op": "fork", "id": self.next_id, "argv": argv, "env": env, "cwd": os.getcwd(),
                            "stdout": str(stdout), "stderr": str(stderr)})
            except OSError as exc:
                self.dead = f"the fork server is gone ({exc})"
                raise ForkServerError(self.dead) from None
        if not wait.event.wait(timeout) or "pid" not in wait.value:
            raise ForkServerError(wait.value.get("error") or self.dead or f"no fork within {timeout:g} s")
        return int(wait.value["pid"])

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit code (negative: the signal), None while it still runs after ``timeout``;
        ForkServerError when the server went away before reporting it."""
        with self.lock:
            wait = self.children[pid]
        if not wait.event.wait(timeout):
            return None
        if "returncode" not in wait.value:
            raise ForkServerError(self.dead or "the fork server exited")
        with self.lock:
            self.children.pop(pid, None)
        return int(wait.value["returncode"])

    def kill(self, pid: int) -> None:
        """SIGKILL the child's process group (by the server, which knows whether the pid is still its own);
        directly when the server cannot be reached."""
        if self.lock.acquire(timeout=2.0):
            try:
                if not self.dead:
                    self._send({"op": "kill", "pid": pid})
                    return
            except OSError:
                pass
            finally:
                self.lock.release()
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """End the server: it kills and reaps the children still running."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_RUNNING: dict[int, ForkServer] = {}  # forked children of this process's record_all calls
_RUNNING_LOCK = threading.Lock()


def kill_all() -> None:
    with _RUNNING_LOCK:
        running = list(_RUNNING.items())
    for pid, server in running:
        server.kill(pid)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def run_forked(server: ForkServer, argv: list[str], env: dict[str, str], timeout: float) -> tuple[str, str, int, bool]:
    """``argv`` in a forked child; past ``timeout`` its whole process group is killed (recorder._run)."""
    with tempfile.TemporaryDirectory(prefix="kernelpilot-record-") as tmp:
        stdout, stderr = Path(tmp) / "stdout", Path(tmp) / "stderr"
        pid = server.spawn(argv, env, stdout, stderr)
        with _RUNNING_LOCK:
            _RUNNING[pid] = server
        timed_out, note = False, ""
        try:
            rc = server.wait(pid, timeout)
            if rc is None:
                timed_out = True
                server.kill(pid)
                server.wait(pid, 30)
                rc = -9
        except ForkServerError as exc:  # the server died with the child running: its group is killed here
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            rc, note = -1, f"\n{exc} before child {pid} ended"
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(pid, None)
        return _read(stdout), _read(stderr) + note, rc, timed_out


def start_server(env: dict[str, str], command: Sequence[str], preload: Sequence[str] = ()) -> ForkServer | None:
    """The fork server for a record_all call, or None (printed why) when its recordings run as subprocesses."""
    if os.environ.get(DISABLE, "1") == "0":
        return None
    if fork_argv(command) is None:
        print(f"recording in subprocesses: {' '.join(command[:2])} is not a Python module or script the fork "
              "server can run", flush=True)
        return None
    try:
        server = ForkServer.start(env, preload)
    except (ForkServerError, OSError, ValueError) as exc:
        print(f"recording in subprocesses: {exc}", flush=True)
        return None
    print(f"fork server {server.info.get('pid')}: imported in {server.info.get('import_s')} s, one fork per "
          "recording", flush=True)
    return server
