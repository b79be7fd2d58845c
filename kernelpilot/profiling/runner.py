"""Run a profiling tool over candidate code with the evaluation worker's confinement and timeouts.

The tool (ncu, compute-sanitizer, or Python with torch.profiler) runs in its own process group with
the scrubbed environment and, where the machine allows, no network, and the whole group is killed
at the timeout. Landlock is not applied here: ncu and compute-sanitizer inject libraries that write
lock and temporary files of their own; the private TMPDIR keeps those away from the user's files.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path


def cuda_tool(name: str) -> str | None:
    """A CUDA toolkit program (``ncu``, ``compute-sanitizer``): from PATH, else the toolkit's bin/."""
    found = shutil.which(name)
    if found:
        return found
    try:
        from kernelpilot.toolkit import find_cuda_home

        path = Path(find_cuda_home()) / "bin" / name
        return str(path) if path.exists() else None
    except Exception:  # no toolkit: no tool either
        return None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_sandboxed(
    cmd: list[str],
    *,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
    writable: list[Path] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` confined; raise subprocess.TimeoutExpired after killing its process group."""
    private_tmp = Path(tempfile.mkdtemp(prefix="kp-profile-"))
    prefix: list[str] = []
    env = dict(os.environ)
    try:
        from kernelpilot.evaluation.confine import WorkerSandbox

        sandbox = WorkerSandbox(writable=list(writable or []), readable=[], private_tmp=private_tmp)
        prefix = list(sandbox.command_prefix())
        env = dict(sandbox.env())
    except ImportError:  # confinement module unavailable: still isolate the process group
        env["TMPDIR"] = str(private_tmp)
    # The profiled program imports kernelpilot: make sure it can, wherever it was installed from.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update(extra_env or {})
    proc = subprocess.Popen(
        prefix + cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(cwd) if cwd else None,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise
    finally:
        _kill_group(proc)  # nothing the tool started outlives it
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
