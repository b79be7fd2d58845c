"""Record torch.compile on the GPU for many problems at once (``record_all``), robust to a killed call.

Each problem is recorded in a fresh process of its own (what ``python -m kernelpilot.inductor.generate``
runs: a torch.compile with no state shared with the others), several at once:

- **startup**: the recording processes are children of one preloading fork server (forkserver.py, its
  client forkclient.py), started once per call while the problems are sized. It imports torch, Inductor,
  Triton and generate.py's dependencies without initialising CUDA (checked before every fork, with no
  thread but its main one) and forks one child per problem: a session of its own (the timeout's group
  kill works as before), its own stdout/stderr files, environment, fresh RNG seeds, dynamo reset, CUDA
  initialised by the child itself; the server reaps it and reports its exit code. On the H200 a fresh
  interpreter spent ~11 s of each recording importing (~150 s of a 250-problem run). Measured on the
  2-core CPU machine, 2026-12-02 (benchmarks/forkserver_startup.py, two runs): the server imports in
  4.1-4.7 s once; request -> child running takes 12-13 ms median (11-19 ms) for 10 children asked one
  after another and 44-47 ms median (11-81 ms) for 10 asked at once, against 5.0-5.5 s for each fresh
  ``python -c 'import torch, torch._inductor.compile_fx, triton'``. A server that cannot start, or
  refuses a request (a thread appeared, a variable read at import differs), leaves that recording to a
  subprocess as before; ``KERNELPILOT_RECORD_FORK=0`` chooses subprocesses for all. Rows and recordings
  say which (``launch``).

- **memory**: every problem is sized first, on the meta device, in a process pool over every core
  (inputs, parameters, buffers and one output; 16 GiB when the meta device cannot run it; an RNN's
  forward is not run there, its output is small). A problem starts only when 1.6 times its size plus
  1.5 GiB of working room (CUDA context, Inductor's workspace) fits in what the running ones leave of
  the budget (``budget_gb``). A recording that still runs out of memory is recorded once more at the
  end, alone on the GPU.
- **order**: the memory-heavy problems (over a sixth of the budget) first, largest first, so that they
  are done while the rest fill the cores; then the others by expected compile work (level, then number
  of modules: the level-3 networks first), so the tail is small problems that pack well. A worker takes
  the first problem in that order that fits the memory left.
- **time**: each process has ``timeout`` seconds; past it its whole process group is killed and the
  problem recorded as failed with that reason. ``deadline`` (seconds from the start of the call) stops
  starting new problems; those left are simply not recorded yet.
- **a killed call keeps what finished**: each ``DIR/<key>.json`` is written (atomically) as its problem
  finishes, and ``DIR/index.json`` (one row per problem recorded so far, this call and earlier ones) after
  each. With ``resume`` (the default), a problem whose recording is there and succeeded (one graph or
  more, or eager) is not recorded again: the same command, run again, does only what is left.
- **autotuning**: the recording processes share the GPU, and a kernel timed while another process's run
  holds the GPU is timed wrong, so Inductor's benchmarking in every recording process holds one file
  lock (generate.py): compiling stays parallel, timing one at a time, and the configs chosen are the
  ones torch.compile alone on the GPU would choose.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelpilot.inductor import forkclient
from kernelpilot.inductor.budget import (
    WORKING_ROOM,
    Estimate,
    Item,
    Scheduler,
    estimate_all,
)
from kernelpilot.inductor.forkclient import ForkServer, ForkServerError
from kernelpilot.inductor.generate import NO_GRAPH, parse_output, recording_env
from kernelpilot.inductor.helpers import ConversionError

INDEX = "index.json"


def recording_status(data: dict[str, Any]) -> str:
    """``ok`` (one graph or more), ``eager`` (dynamo compiled nothing), ``failed``."""
    if data.get("error") and data["error"] != NO_GRAPH:
        return "failed"
    return "ok" if (data.get("graphs") or data.get("code")) else "eager"


@dataclass
class Index:
    """DIR/index.json: one row per problem recorded, rewritten after each."""

    path: Path
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        try:
            self.rows = {r["problem"]: r for r in json.loads(self.path.read_text(encoding="utf-8"))}
        except (OSError, ValueError, KeyError, TypeError):
            self.rows = {}

    def add(self, row: dict[str, Any]) -> None:
        with self.lock:
            self.rows[row["problem"]] = row
            write_atomic(self.path, json.dumps(sorted(self.rows.values(), key=lambda r: r["problem"]), indent=1))


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def recorded(out: Path, key: str) -> bool:
    """A recording of ``key`` is there and succeeded."""
    try:
        return recording_status(json.loads((out / f"{key}.json").read_text(encoding="utf-8"))) != "failed"
    except (OSError, ValueError):
        return False


_RUNNING: set[subprocess.Popen[str]] = set()  # the recording processes of this call, killed with it
_RUNNING_LOCK = threading.Lock()


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_running() -> None:
    """Kill every recording process still running (their own sessions: a killed parent would leave them)."""
    with _RUNNING_LOCK:
        for proc in list(_RUNNING):
            _kill(proc)
    forkclient.kill_all()


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[str, str, int, bool]:
    """Run ``cmd`` in a session of its own; past ``timeout`` the whole process group is killed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        return stdout, stderr, proc.returncode, False
    except subprocess.TimeoutExpired:
        _kill(proc)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes
            proc.kill()
            stdout, stderr = "", ""
        return stdout or "", stderr or "", -9, True
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


GENERATE = [sys.executable, "-m", "kernelpilot.inductor.generate"]  # + problem, compile mode


def _launch(cmd: list[str], env: dict[str, str], timeout: float,
            server: ForkServer | None) -> tuple[str, str, int, bool, str]:
    """``_run``, in a child of the fork server when there is one that can run ``cmd``; + how it ran."""
    argv = forkclient.fork_argv(cmd) if server is not None else None
    if server is not None and argv is not None:
        try:
            return (*forkclient.run_forked(server, argv, env, timeout), "fork")
        except ForkServerError as exc:  # refused before any child existed: this one in a subprocess
            print(f"recording in a subprocess: {exc}", flush=True)
    return (*_run(cmd, env, timeout), "subprocess")


def record_one(item: Item, out: Path, timeout: float, env: dict[str, str], compile_mode: str = "default",
               estimate_bytes: int = 0, command: list[str] | None = None,
               server: ForkServer | None = None) -> dict[str, Any]:
    """Record one problem in a fresh process (a child of ``server``, or a subprocess); writes
    ``out/<key>.json``; returns its index row."""
    t0 = time.monotonic()
    env = dict(env, KERNELPILOT_LAUNCHED=repr(time.time()))
    stdout, stderr, rc, timed_out, launch = _launch([*(command or GENERATE), str(item.path), compile_mode], env,
                                                    timeout, server)
    seconds = round(time.monotonic() - t0, 2)
    data = parse_output(stdout)
    if data is None:
        tail = "\n".join(stderr.strip().splitlines()[-12:])
        why = f"timed out after {timeout:g} s" if timed_out else f"no recording (exit {rc})"
        data = {"error": f"{why}: {tail}" if tail else why}
    data.update(problem=item.key, seconds=seconds, returncode=rc, estimate_bytes=estimate_bytes, launch=launch)
    status = recording_status(data)
    if status == "failed" and stderr:
        data["stderr_tail"] = "\n".join(stderr.strip().splitlines()[-40:])
    write_atomic(out / f"{item.key}.json", json.dumps(data))
    graphs = len(data.get("graphs") or ([1] if data.get("code") else []))
    return {"problem": item.key, "status": status, "graphs": graphs, "seconds": seconds,
            "compile_s": data.get("compile_s"), "timings": data.get("timings") or {},
            "peak_bytes": data.get("peak_bytes"), "estimate_bytes": estimate_bytes, "breaks": data.get("breaks") or [],
            "launch": launch,
            "error": (data.get("error") or "")[:600] if status == "failed" else ""}


def _print(row: dict[str, Any]) -> None:
    peak = (row.get("peak_bytes") or 0) / 2**30
    print(f"{row['problem']}: {row['status']} graphs={row['graphs']} {row['seconds']:.1f} s peak={peak:.1f} GiB"
          + (f"  {row['error'][:160]!r}" if row["status"] == "failed" else ""), flush=True)


def _out_of_memory(row: dict[str, Any]) -> bool:
    return row["status"] == "failed" and "out of memory" in row.get("error", "").lower()


def record_all(items: list[Item], out: Path, jobs: int | None = None, budget_gb: float = 110.0, timeout: float = 300.0,
               compile_mode: str = "default", sizes: dict[str, int] | None = None, resume: bool = True,
               deadline: float | None = None, report: Callable[[dict[str, Any]], None] = _print,
               command: list[str] | None = None, preload: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Record every item (see the module docstring); returns the index rows of this call. ``command``:
    what records one problem (default ``GENERATE``), given the problem's path and the compile mode;
    ``preload``: what the fork server imports (default forkserver.PRELOAD)."""
    import torch

    if command is None and not torch.cuda.is_available():
        raise ConversionError("no CUDA GPU is visible, so torch.compile cannot generate its Triton kernels here; "
                              "record on a GPU machine, then convert here with --recordings DIR")
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 1
    todo = [i for i in items if not (resume and recorded(out, i.key))]
    if len(todo) < len(items):
        print(f"{len(items) - len(todo)} problems already recorded in {out}: kept", flush=True)
    env = _recording_env()
    estimates, server = _sized(todo, sizes or {}, jobs, env, command, preload)
    total = int(budget_gb * 2**30)
    need = {i.key: int(1.6 * estimates[i.key].bytes) + WORKING_ROOM for i in todo}
    heavy = sorted((i for i in todo if need[i.key] > total / 6), key=lambda i: -need[i.key])
    rest = sorted((i for i in todo if need[i.key] <= total / 6), key=lambda i: -estimates[i.key].work)
    recording = _Recording(out, timeout, env, compile_mode, estimates, command, server, need, total,
                           None if deadline is None else started + deadline, report, Index(out / INDEX))
    return recording.all(heavy + rest, todo, jobs)


def _recording_env() -> dict[str, str]:
    """The environment of every recording: one compile thread, the benchmarking lock, this kernelpilot."""
    lock = Path(tempfile.gettempdir()) / f"kernelpilot-inductor-bench-{os.getuid()}.lock"
    root = Path(__file__).resolve().parents[2]
    env = dict(recording_env(), TORCHINDUCTOR_COMPILE_THREADS="1", KERNELPILOT_BENCH_LOCK=str(lock),
               PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep))
    env.setdefault("OMP_NUM_THREADS", "1")  # also keeps numpy's OpenBLAS from starting threads in the fork server
    return env


def _sized(todo: list[Item], sizes: dict[str, int], jobs: int, env: dict[str, str], command: list[str] | None,
           preload: tuple[str, ...]) -> tuple[dict[str, Estimate], ForkServer | None]:
    """Every problem's estimate (``sizes`` given for some), while the fork server imports; and the server."""
    servers: list[ForkServer | None] = []

    def start() -> None:
        servers.append(forkclient.start_server(env, command or GENERATE, preload))

    starter = threading.Thread(target=start, name="forkserver-start", daemon=True)
    if todo:
        starter.start()
    estimates: dict[str, Estimate] | None = None
    try:
        estimates = estimate_all([i for i in todo if i.key not in sizes], jobs)
    finally:
        if todo:
            starter.join()
        server = servers[0] if servers else None
        if estimates is None and server is not None:  # estimate_all raised: no recording follows
            server.close()
    assert estimates is not None
    for key, size in sizes.items():
        estimates[key] = Estimate(size, estimates.get(key, Estimate(size, 0)).work)
    return estimates, server


@dataclass
class _Recording:
    """One record_all call's recordings: threads taking problems from a Scheduler within the memory budget."""

    out: Path
    timeout: float
    env: dict[str, str]
    compile_mode: str
    estimates: dict[str, Estimate]
    command: list[str] | None
    server: ForkServer | None
    need: dict[str, int]
    total: int
    until: float | None
    report: Callable[[dict[str, Any]], None]
    index: Index
    rows: list[dict[str, Any]] = field(default_factory=list)

    def all(self, order: list[Item], todo: list[Item], jobs: int) -> list[dict[str, Any]]:
        """Record ``order`` on ``jobs`` threads, then alone each problem that ran out of memory; a TERM (a
        timeout, a killed job) ends the recordings too. The fork server is closed at the end."""
        previous = None
        if threading.current_thread() is threading.main_thread():

            def terminate(signum: int, frame: Any) -> None:
                kill_running()
                raise SystemExit(128 + signum)

            previous = signal.signal(signal.SIGTERM, terminate)
        try:
            self.run(order, jobs)
            again = [i for i in todo if any(r["problem"] == i.key and _out_of_memory(r) for r in self.rows)]
            if again:  # alone on the GPU this time
                print(f"recording {len(again)} problems again, one at a time, after running out of memory", flush=True)
                self.rows[:] = [r for r in self.rows if r["problem"] not in {i.key for i in again}]
                self.run(again, 1)
        except BaseException:
            kill_running()
            raise
        finally:
            if self.server is not None:
                self.server.close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        return self.rows

    def run(self, order: list[Item], threads: int) -> None:
        scheduler = Scheduler(order, self.need, self.total, self.until)
        workers = [threading.Thread(target=self._work, args=(scheduler,), daemon=True) for _ in range(max(1, threads))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    def _work(self, scheduler: Scheduler) -> None:
        while (item := scheduler.take()) is not None:
            try:
                row = record_one(item, self.out, self.timeout, self.env, self.compile_mode,
                                 self.estimates[item.key].bytes, self.command, self.server)
            finally:
                scheduler.give(item)
            self.rows.append(row)
            self.index.add(row)
            self.report(row)
