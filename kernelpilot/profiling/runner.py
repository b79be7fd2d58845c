"""Run a profiling tool over candidate code with the evaluation worker's confinement and timeouts.

The tool (ncu, compute-sanitizer, or Python with torch.profiler) runs in its own session with the
scrubbed environment and, where the machine allows, no network; at the timeout, and when it ends,
everything it started is killed (confine.kill_process_group: the tree, the group, the sandbox tag).
Landlock is not applied here: ncu and compute-sanitizer inject libraries that write lock and
temporary files of their own; the private TMPDIR keeps those away from the user's files.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kernelpilot.toolkit import find_cuda_home


def cuda_tool(name: str) -> str | None:
    """A CUDA toolkit program (``ncu``, ``compute-sanitizer``): from PATH, else the toolkit's bin/."""
    found = shutil.which(name)
    if found:
        return found
    try:
        path = Path(find_cuda_home()) / "bin" / name
        return str(path) if path.exists() else None
    except Exception:  # no toolkit: no tool either
        return None


def run_sandboxed(
    cmd: list[str],
    *,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
    writable: list[Path] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` confined; raise subprocess.TimeoutExpired after killing everything it started."""
    from kernelpilot.evaluation.sandbox.confine import WorkerSandbox, kill_process_group

    sandbox = WorkerSandbox(writable=list(writable or []))
    # the sandbox's environment already puts this package on PYTHONPATH for the profiled program
    env = {**sandbox.env(), **(extra_env or {})}
    proc = subprocess.Popen(
        sandbox.command_prefix() + cmd,
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
        kill_process_group(proc, marker=sandbox.id)
        proc.communicate()
        raise
    finally:
        kill_process_group(proc, marker=sandbox.id)  # nothing the tool started outlives it
        sandbox.cleanup()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
