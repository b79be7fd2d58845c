"""kernelpilot/process_exit.py: a build process leaves without the interpreter's teardown, unless a child of its
may hold the build's output pipe open until an atexit hook ends it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kernelpilot.process_exit import child_processes

SCRIPT = textwrap.dedent("""
    import atexit, subprocess, sys
    from pathlib import Path
    from kernelpilot.process_exit import leave
    marker = Path(sys.argv[1])
    atexit.register(lambda: marker.write_text("teardown ran"))
    if sys.argv[2] == "child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        atexit.register(child.kill)
    print("result line", end="")  # unflushed: leave flushes it
    leave(3)
""")


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    marker = tmp_path / f"{mode}.txt"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(marker), mode], capture_output=True, text=True,
                          timeout=60)
    return proc, marker


def test_without_children_it_leaves_at_once_with_its_status_and_output(tmp_path: Path) -> None:
    proc, marker = _run(tmp_path, "alone")
    assert proc.returncode == 3 and proc.stdout == "result line"
    assert not marker.exists()  # no teardown: atexit hooks did not run


def test_with_a_child_alive_it_exits_as_usual(tmp_path: Path) -> None:
    proc, marker = _run(tmp_path, "child")
    assert proc.returncode == 3 and proc.stdout == "result line"
    assert marker.read_text() == "teardown ran"  # the hook that ends the child ran: the pipe closes


def test_child_processes_lists_this_process_s_children() -> None:
    assert child_processes() is not None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in (child_processes() or [])
    finally:
        child.kill()
        child.wait()
    assert child.pid not in (child_processes() or [])
