"""Confine the evaluation worker: it reaches the GPU and its own files, nothing else.

Layers, each used when the machine supports it (``detect()``), each named in ``description()``:

* **env-scrubbed** — the worker starts from an allow-listed environment (PATH, locale, CUDA / torch /
  Triton variables); secrets never pass; HOME and TMPDIR point into a private directory.
* **namespaces** — ``unshare --net --map-root-user`` gives the worker an empty network namespace;
  with ``--pid --fork --kill-child --mount-proc`` it also gets its own PID namespace: it sees only
  its own processes in /proc (no reading other processes' environment), and when it ends the kernel
  kills everything it started. ``/dev/nvidia*`` are opened by path and keep working.
* **Landlock** — the worker restricts itself (``apply_in_process``) before importing candidate code:
  read + execute on the toolchain (Python, site-packages, CUDA, /usr), read-write on the writable
  directories and the private directory, read-write-ioctl on the GPU device files; everything else,
  including the user's home, is refused. With ABI >= 4 TCP is refused too; ABI >= 6 forbids
  signalling processes outside the sandbox.
* **seccomp** — socket() for UNIX, IP and packet families fails (named UNIX sockets such as an SSH
  agent or docker.sock are outside both Landlock and the network namespace).
* **rlimits / process group** — CPU seconds, open files, processes, file size, no core files; the
  worker leads its own session, dies with its parent, and ``kill_process_group`` leaves nothing.

Nothing here is a substitute for reviewing native code: see docs/verification.md, "What kernelpilot protects against".
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.evaluation.sandbox import primitives as _oslayer
from kernelpilot.evaluation.sandbox.environment import (
    ResourceLimits,
    compiler_read_paths,
    device_paths,
    env_name_allowed,
    scrubbed_env,
    toolchain_read_paths,
)

__all__ = [
    "Capabilities", "ConfinementError", "ResourceLimits", "WorkerSandbox", "apply_from_env", "apply_spec",
    "compiler_read_paths", "detect", "device_paths", "env_name_allowed", "kill_process_group", "scrubbed_env",
    "toolchain_read_paths",
]

SANDBOX_ENV = "KERNELPILOT_SANDBOX"  # JSON spec the worker reads in apply_from_env()
MARKER_ENV = "KERNELPILOT_SANDBOX_ID"  # tags every process of one sandbox (for clean-up)

# ---- capabilities ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    landlock_abi: int = 0
    landlock_reason: str = ""  # why Landlock is unavailable
    netns: bool = False  # unshare --net --map-root-user works
    pidns: bool = False  # ... plus --pid --fork --kill-child --mount-proc
    netns_reason: str = ""
    seccomp: bool = False
    bwrap: str | None = None  # detected, not used (namespaces via unshare cover the same ground)
    nsjail: str | None = None


_UNSHARE_NET = ["unshare", "--net", "--map-root-user"]
_UNSHARE_PID = ["--pid", "--fork", "--kill-child", "--mount-proc"]


@functools.cache
def detect() -> Capabilities:
    """What this machine supports (cached per process)."""
    abi, reason = _oslayer.landlock_abi()
    netns, pidns, ns_reason = False, False, ""
    if shutil.which("unshare") is None:
        ns_reason = "unshare not installed"
    else:
        netns, ns_reason = _probe(_UNSHARE_NET + ["true"])
        if netns:
            pidns, _ = _probe(_UNSHARE_NET + _UNSHARE_PID + ["true"])
    return Capabilities(landlock_abi=abi, landlock_reason=reason, netns=netns, pidns=pidns,
                        netns_reason=ns_reason, seccomp=_oslayer.seccomp_supported(),
                        bwrap=shutil.which("bwrap"), nsjail=shutil.which("nsjail"))


def _probe(argv: list[str]) -> tuple[bool, str]:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


# ---- the sandbox -------------------------------------------------------------------------------


class ConfinementError(Exception):
    """The worker could not confine itself as its spec demands (it must not run candidate code)."""


class WorkerSandbox:
    """The confinement of one evaluation worker; see the module docstring for the layers.

    ``writable``: the candidate's worktree, its build directory, ... (created when missing).
    ``readable``: extra read-only paths (the problem file's directory, ...); the toolchain is added.
    ``private_tmp``: a private directory holding HOME, TMPDIR and, unless ``cache_dir`` is given,
    the Triton / Inductor / CUDA caches; a fresh temporary directory when None (``cleanup()``).
    Spawn with ``Popen(sb.command_prefix() + argv, env=sb.env(), preexec_fn=sb.preexec(), cwd=...)``
    and call ``apply_in_process()`` (or ``apply_from_env()``) first thing in the worker, or run any
    command fully confined with ``Popen(sb.wrap(argv), env=sb.env(), preexec_fn=sb.preexec())``.
    """

    def __init__(self, writable: Iterable[str | Path], readable: Iterable[str | Path] = (),
                 private_tmp: str | Path | None = None, limits: ResourceLimits | None = None, *,
                 cache_dir: str | Path | None = None, base_env: Mapping[str, str] | None = None,
                 extra_env: Mapping[str, str] | None = None, capabilities: Capabilities | None = None,
                 namespaces: bool = True, landlock: bool = True, seccomp: bool = True,
                 die_with_parent: bool = True) -> None:
        self.caps = capabilities or detect()
        self.limits = limits or ResourceLimits()
        self._own_tmp = private_tmp is None
        self.private_tmp = Path(private_tmp or tempfile.mkdtemp(prefix="kernelpilot-worker-")).resolve()
        self.home, self.tmp = self.private_tmp / "home", self.private_tmp / "tmp"
        self.cache_dir = Path(cache_dir).resolve() if cache_dir else self.private_tmp / "cache"
        for d in (self.home, self.tmp, self.cache_dir):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.writable = _unique([self.private_tmp, self.cache_dir, *(_made(p) for p in writable)])
        shm = [Path("/dev/shm")] if Path("/dev/shm").is_dir() else []
        self.readable = _unique([*(Path(p).resolve() for p in readable), *toolchain_read_paths()])
        self._shm = shm
        self.devices = device_paths()
        self.base_env, self.extra_env = base_env, dict(extra_env or {})
        self.use_ns = namespaces and self.caps.netns
        self.use_landlock = landlock and self.caps.landlock_abi > 0
        self.use_seccomp = seccomp and self.caps.seccomp
        self.die_with_parent = die_with_parent
        self.id = uuid.uuid4().hex

    # ---- spawning ------------------------------------------------------------------------------
    def command_prefix(self) -> list[str]:
        if not self.use_ns:
            return []
        return list(_UNSHARE_NET) + (list(_UNSHARE_PID) if self.caps.pidns else [])

    def wrap(self, argv: list[str]) -> list[str]:
        """Full argv running ``argv`` confined: namespaces, then Landlock/seccomp, then exec."""
        return self.command_prefix() + [sys.executable, "-m", "kernelpilot.evaluation.sandbox.confine", "--", *argv]

    def spec(self) -> dict[str, object]:
        return {"id": self.id, "landlock_abi": self.caps.landlock_abi if self.use_landlock else 0,
                "seccomp": self.use_seccomp, "read": [str(p) for p in self.readable],
                "write": [str(p) for p in self.writable + self._shm], "devices": [str(p) for p in self.devices]}

    def env(self) -> dict[str, str]:
        cache = self.cache_dir
        defaults = {"TRITON_CACHE_DIR": cache / "triton", "TORCHINDUCTOR_CACHE_DIR": cache / "inductor",
                    "CUDA_CACHE_PATH": cache / "nv", "TORCH_EXTENSIONS_DIR": cache / "torch_extensions",
                    "XDG_CACHE_HOME": cache, "CUTE_DSL_CACHE_DIR": cache / "cute"}
        env = scrubbed_env(self.base_env, self.home, self.extra_env, self.tmp)
        for k, v in defaults.items():
            if k not in self.extra_env:
                env[k] = str(v)  # the user's own cache locations are outside the sandbox
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                      if p and p != root])
        env[SANDBOX_ENV] = json.dumps(self.spec())
        env[MARKER_ENV] = self.id
        return env

    def preexec(self) -> Callable[[], None]:
        """For Popen(preexec_fn=...): new session, rlimits, SIGKILL when the parent thread dies.

        PR_SET_PDEATHSIG fires when the *thread* that spawned the worker exits: spawn from a
        long-lived thread (main or event-loop thread) or pass ``die_with_parent=False``.
        """
        settings = []
        for res, soft in self.limits.settings():
            _, hard = resource.getrlimit(res)
            new_hard = soft + 30 if res == resource.RLIMIT_CPU else soft
            settings.append((res, soft, hard if hard != resource.RLIM_INFINITY and hard < new_hard else new_hard))
        die = self.die_with_parent
        _oslayer._libc()  # load libc before fork

        def _pre() -> None:
            os.setsid()
            for res, soft, hard in settings:
                try:
                    resource.setrlimit(res, (soft, hard))
                except (ValueError, OSError):
                    pass
            if die:
                _oslayer.prctl(_oslayer.PR_SET_PDEATHSIG, signal.SIGKILL)

        return _pre

    def apply_in_process(self) -> list[str]:
        return apply_spec(self.spec())

    # ---- reporting and clean-up ----------------------------------------------------------------
    def description(self) -> list[str]:
        caps, out = self.caps, ["env-scrubbed"]
        if self.use_ns:
            out.append("netns: no network")
            out.append("pidns: own process table, all killed on exit" if caps.pidns else
                       "pidns: unavailable (other processes visible in /proc)")
        else:
            out.append(f"netns: unavailable ({caps.netns_reason})" if not caps.netns else "netns: disabled")
        if self.use_landlock:
            tcp = ", tcp refused" if caps.landlock_abi >= 4 else ""
            out.append(f"landlock-abi{caps.landlock_abi}: fs writes limited to {len(self.writable)} dirs, "
                       f"reads to the toolchain + {len(self.readable)} paths{tcp}")
        else:
            out.append(f"landlock: unavailable ({caps.landlock_reason})" if not caps.landlock_abi else
                       "landlock: disabled")
        out.append("seccomp: no new unix/ip sockets" if self.use_seccomp else
                   "seccomp: unavailable" if not caps.seccomp else "seccomp: disabled")
        out.append(self.limits.describe())
        out.append("process-group" + (" + die-with-parent" if self.die_with_parent else ""))
        return out

    def cleanup(self) -> None:
        if self._own_tmp:
            shutil.rmtree(self.private_tmp, ignore_errors=True)


def _made(p: str | Path) -> Path:
    path = Path(p)
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _unique(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out


def apply_spec(spec: Mapping[str, object]) -> list[str]:
    """Confine the calling process as ``spec`` says; irreversible. Raises ConfinementError."""
    done: list[str] = []
    try:
        if os.getpid() != 1:  # outside a PID namespace: orphans re-parent to us, so we can find them
            _oslayer.prctl(_oslayer.PR_SET_CHILD_SUBREAPER, 1)
            done.append("subreaper")
        if spec.get("seccomp"):
            _oslayer.seccomp_refuse_sockets()
            done.append("seccomp")
        abi = int(spec.get("landlock_abi") or 0)  # type: ignore[call-overload]
        threads = _oslayer.thread_count()
        if abi and threads > 1:
            # Landlock (ABI < 8) confines the calling thread and its future children only.
            done.append(f"warning: {threads - 1} thread(s) started before confinement are not under Landlock "
                        "(apply it before importing torch)")
        if abi:
            _oslayer.landlock_restrict(abi, [Path(p) for p in spec["read"]],  # type: ignore[union-attr]
                                       [Path(p) for p in spec["write"]],  # type: ignore[union-attr]
                                       [Path(p) for p in spec["devices"]])  # type: ignore[union-attr]
            done.append(f"landlock-abi{abi}")
    except OSError as err:
        raise ConfinementError(f"the worker could not confine itself ({err}); "
                               "run with confinement disabled only on a trusted machine") from err
    return done


def apply_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """Worker side: apply the spec the parent put in $KERNELPILOT_SANDBOX (no-op when absent)."""
    text = (os.environ if environ is None else environ).get(SANDBOX_ENV)
    return apply_spec(json.loads(text)) if text else []


# ---- ending a worker ---------------------------------------------------------------------------


def kill_process_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | int, grace_s: float = 2.0,
                       marker: str | None = None) -> None:
    """End the worker and everything it started: its tree, its process group, its session, and
    (``marker`` = the sandbox id) any process still carrying the sandbox's environment tag.

    The tree is collected and stopped before anything dies, so double-forked daemons (re-parented
    to the worker, a child subreaper) are found; SIGTERM to the group, then SIGKILL to all.
    """
    pid = proc if isinstance(proc, int) else proc.pid
    victims: set[int] = set()
    me = os.getpid()
    for _ in range(10):  # stop new processes appearing while we look
        found = _tree(pid, marker) - victims - {me}
        for v in found:
            _signal(v, signal.SIGSTOP)
        victims |= found
        if not found:
            break
    own_group = os.getpgrp()
    try:
        pgid = os.getpgid(pid)
    except OSError:
        pgid = None
    if pgid is not None and pgid != own_group:
        _killpg(pgid, signal.SIGTERM)
        _killpg(pgid, signal.SIGCONT)
    _wait(proc, grace_s)
    if pgid is not None and pgid != own_group:
        _killpg(pgid, signal.SIGKILL)
    for v in victims | (_tree(pid, marker) - {me}):
        _signal(v, signal.SIGKILL)
    _wait(proc, 5.0)


def _tree(root: int, marker: str | None) -> set[int]:
    table = _oslayer.process_table()
    out = {root} if root in table else set()
    children: dict[int, list[int]] = {}
    for p, (ppid, sid) in table.items():
        children.setdefault(ppid, []).append(p)
        if sid == root:
            out.add(p)
    stack = list(out)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in out:
                out.add(c)
                stack.append(c)
    if marker:
        tag = f"{MARKER_ENV}={marker}".encode()
        out |= {p for p in table if _oslayer.environ_has(p, tag)}
    return out


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def _wait(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | int, timeout: float) -> None:
    if isinstance(proc, int):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if os.waitpid(proc, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            time.sleep(0.02)
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def _main(argv: list[str]) -> int:
    """``python -m kernelpilot.evaluation.sandbox.confine -- CMD ...``: confine, then exec CMD."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m kernelpilot.evaluation.sandbox.confine -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        apply_from_env()
    except ConfinementError as err:
        print(f"kernelpilot: {err}", file=sys.stderr)
        return 126
    os.execvp(argv[0], argv)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
