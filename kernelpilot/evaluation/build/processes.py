"""Running a build's processes: in a session of their own, killed (compilers included) at a timeout or a cancel."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kernelpilot.evaluation.build.standby import lower_priority
from kernelpilot.verdict import BuildReport, Diagnostic

if TYPE_CHECKING:
    from kernelpilot.evaluation.supersede import CancelToken


def run_in_session(argv: list[str], env: dict[str, str], *, cwd: Path, timeout_s: float,
                   proc: subprocess.Popen[bytes] | None = None,
                   cancel: CancelToken | None = None) -> tuple[str, bool, int]:
    """Run ``argv`` (or wait for ``proc``, already sent this build) in its own session, killed at the timeout
    (or when ``cancel`` is cancelled)."""
    if proc is None:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        lower_priority(proc.pid, env)
    if cancel is not None:
        cancel.attach(proc)
    try:
        raw, _ = proc.communicate(timeout=timeout_s)
        return raw.decode("utf-8", "replace"), False, proc.returncode
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        try:
            raw, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            raw = b""
        return raw.decode("utf-8", "replace"), True, proc.returncode if proc.returncode is not None else -9


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``: the build, ninja, and the compilers ninja put in their own groups."""
    for _ in range(20):
        victims = [pid for pid in _session_members(sid)]
        try:
            os.killpg(sid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not victims:
            return
        time.sleep(0.05)


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        # fields after the command: state ppid pgrp session ...; zombies are already dead
        if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
            members.append(int(entry))
    return members


def superseded_report(directory: Path, command: str, seconds: float) -> BuildReport:
    """The report of a build a newer save cancelled: killed, its lock file released, no diagnostics."""
    release_lock(directory, {})
    return BuildReport(ok=False, seconds=round(seconds, 3), command=command, build_dir=str(directory),
                       diagnostics=[Diagnostic(severity="note", tool="build",
                                               message="superseded: a newer save cancelled this build")])


def release_lock(directory: Path, result: dict) -> None:
    """A killed build leaves torch's lock file behind on torch versions that use a lock file."""
    for build_dir in {directory, Path(result.get("build_dir", directory))}:
        for lock in [build_dir / "lock", *build_dir.glob("*/lock")]:
            try:
                lock.unlink()
            except OSError:
                pass


def scratch_dir(directory: Path) -> Path:
    """Where a single-file candidate's build step runs: what its code writes to a relative path (a .cu file, a
    build folder) lands in kernelpilot's build folder, never in the user's folder beside the file (the worker
    runs in a work folder of its own too)."""
    folder = directory / "kp-cwd"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
