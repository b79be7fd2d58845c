"""The real program in a real terminal: `python -m kernelpilot` in tmux, keys sent, screen read back.

Manual mode on a temporary project (no model), in an 80x24 terminal: the problem card says what the
problem is and how to pair with a model, /help answers, ctrl+o suspends the app for $EDITOR (a script
that edits the kernel), the save is noticed and evaluated by the real engine (on a machine without a
GPU: a build-only verdict, shown as built), ctrl+t shows the hidden candidates panel, and /quit leaves
with status 0. Skipped when tmux is not installed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_support import candidate_files, git, make_project
from kernelpilot.machine import gpu_count

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"), pytest.mark.slow]


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def capture(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_screen(session: str, cond: Callable[[str], bool], timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(session)
        if cond(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")


def card_path(screen: str) -> str:
    """The card's `edit` value: from the `edit` label to the line about the session's copy, lines joined."""
    lines = [line.strip(" │┃▎") for line in screen.splitlines()]
    start = next((i for i, line in enumerate(lines) if line.startswith("edit ")), None)
    assert start is not None, screen
    parts = [lines[start].removeprefix("edit").strip()]
    for line in lines[start + 1:]:
        if line.startswith("(the session's copy"):
            break
        parts.append(line.strip())
    return "".join(parts)


def test_manual_mode_in_a_real_terminal(tmp_path: Path) -> None:
    problem = make_project(tmp_path / "proj")
    kernels = problem.parent / "kernels" / "vector_scale"
    kernels.mkdir(parents=True)
    for name, text in candidate_files().items():
        (kernels / name).write_text(text)
    git(problem.parent, "add", "-A")
    git(problem.parent, "commit", "-q", "-m", "candidate")
    marker = tmp_path / "editor-ran"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {marker}\n'
                      'for f in "$@"; do case "$f" in *.cu) echo "// edited in the editor" >> "$f";; esac; done\n')
    editor.chmod(0o755)
    # A short data folder: the card wraps the path of the file to edit over its lines, and pytest's folder for this
    # test is 60 to 80 characters deep (the run's number, xdist's worker), so the card's height at 80x24 depended on
    # it. A full run under load once read the card without its "ctrl+o opens it" line: the wait below now asks for
    # that line too.
    data = Path(tempfile.mkdtemp(prefix="kp-tmux-")) / "data"
    env = {"KERNELPILOT_DATA_DIR": str(data), "TERM": "xterm-256color", "EDITOR": str(editor),
           "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", str(tmp_path))}
    if os.environ.get("PYTHONPATH"):  # the checkout under test, when it is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    command = " ".join([
        "env", "-i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
        shlex.quote(sys.executable), "-m", "kernelpilot", shlex.quote(str(problem)),
        "; echo KP_EXIT=$?; sleep 60",
    ])
    session = f"kp-tui-test-{os.getpid()}"
    started = time.monotonic()
    tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", command)
    gpu = gpu_count() > 0
    try:
        first = wait_screen(session, lambda s: "Message the agent" in s, 30, "first paint")
        first_paint_s = time.monotonic() - started
        # the card is drawn before the session exists; the file to edit is named once the worktree is made
        worktrees = str(data / "worktrees")
        # the card's first lines are asked for too: a full run under load once read the card in a frame where it
        # was still as tall as before its last change (blank lines at its foot), its first lines scrolled away
        screen = wait_screen(session, lambda s: "moves " in s and "(the session's copy" in s and "$EDITOR" in s
                             and card_path(s).startswith(worktrees) and "input     65536" in s
                             and "vector_scale  vector_scale.py" in s, 90, "the problem card")
        assert "input     65536 float32 (256.00 KiB)" in screen and "vector_scale  vector_scale.py" in screen, screen
        named = card_path(screen)  # the absolute path of the worktree's copy, wrapped over card lines
        assert named.startswith(str(data / "worktrees")) and named.endswith("/kernels/vector_scale/kernel.cu"), named
        assert "ctrl+o opens it in $EDITOR" in screen
        assert "--model anthropic/claude-sonnet-4-5" in screen and "manual (no model)" in screen
        assert "Manual mode" in screen and "Quit" in screen
        if not gpu:
            assert "eager and torch.compile times need a GPU; none is visible" in screen and "no GPU" in screen
        card = screen

        tmux("send-keys", "-t", session, "/help", "Enter")
        screen = wait_screen(session, lambda s: "Anything else you type is sent to the agent" in s, 30, "/help")
        assert "command palette" in screen  # the end of the list; the rest is above, scrolled

        tmux("send-keys", "-t", session, "C-o")  # open the candidate in $EDITOR
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        opened = marker.read_text().split()
        assert opened == [named], opened  # exactly the file the card names: the worktree's copy, not the repo's
        screen = wait_screen(session, lambda s: "your edit e1" in s, 300, "the edit evaluated as e1")
        if not gpu:
            assert "correctness and timing need a GPU" in screen.replace("\n", " ").replace("│", "")
        tmux("send-keys", "-t", session, "C-t")  # the candidates panel, hidden at 80x24
        screen = wait_screen(session, lambda s: "e1 ✎" in s, 30, "the candidates panel")
        row = next(line for line in screen.splitlines() if "e1 ✎" in line)
        assert ("built" in row and "crashed" not in row) if not gpu else ("ok" in row or "incorrect" in row), row
        tmux("send-keys", "-t", session, "C-t")
        wait_screen(session, lambda s: "e1 ✎" not in s, 30, "the panel hidden again")

        tmux("send-keys", "-t", session, "/quit", "Enter")
        screen = wait_screen(session, lambda s: "KP_EXIT=" in s, 60, "exit")
        assert "KP_EXIT=0" in screen
        sid = next(p.name for p in (data / "worktrees").iterdir())
        flat = screen.replace("\n", "")  # the farewell, printed once the terminal is the shell's again
        assert f"kernelpilot session {sid}:" in flat and f"--resume {sid}" in flat, screen
        assert f"kernelpilot sessions rm {sid}" in flat and "with it e1" in flat, screen
        print(f"first paint after {first_paint_s:.2f} s (including interpreter start)\n{first}\n{card}")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        shutil.rmtree(data.parent, ignore_errors=True)
