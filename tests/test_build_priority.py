"""Builds run at a lower CPU priority than the worker that times candidates on the GPU (a suite builds on
every core beside it): the build's process and the compilers it starts later inherit the priority."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernelpilot.evaluation.build.processes import run_in_session as _run
from kernelpilot.evaluation.build.standby import BUILD_NICE, Standby

# the child reports its priority after a pause: the caller lowers it just after the start
SHOW = "import os, subprocess, sys, time; time.sleep(1.0); print(os.nice(0)); " \
       "print(subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'], capture_output=True, " \
       "text=True).stdout)"


def test_a_build_and_its_compilers_step_back(tmp_path: Path) -> None:
    mine = os.nice(0)
    out, timed_out, rc = _run([sys.executable, "-c", SHOW], dict(os.environ), cwd=tmp_path, timeout_s=60)
    assert rc == 0 and not timed_out, out
    build, compiler = [int(x) for x in out.split()]
    assert build == compiler == max(mine, min(BUILD_NICE, 19)), out


def test_the_priority_can_be_left_alone(tmp_path: Path) -> None:
    mine = os.nice(0)
    env = dict(os.environ, KERNELPILOT_BUILD_NICE="0")
    out, _, rc = _run([sys.executable, "-c", SHOW], env, cwd=tmp_path, timeout_s=60)
    assert rc == 0 and [int(x) for x in out.split()] == [mine, mine], out


def test_the_waiting_builder_steps_back_too() -> None:
    standby = Standby(dict(os.environ))
    try:
        assert standby.proc is not None
        assert os.getpriority(os.PRIO_PROCESS, standby.proc.pid) == max(os.nice(0), min(BUILD_NICE, 19))
    finally:
        standby.close()
