"""``kernelpilot run PROBLEM``: the agent loop without the TUI.

Prints every Event as a JSON line (``--jsonl``) or as a readable log; a replayed session
(``--replay FILE``) is labelled as such in both. Exit status 0 iff an approved candidate exists (for a
replay: iff it was played to its end, not stopped by an error, a budget or Ctrl-C). A replay needs no GPU:
without one its evaluations are builds (``build_only``).
``--resume SESSION`` continues a session from its transcript; ``--watch`` is manual pairing
(kernelpilot.agent.watch). Ctrl-C cancels the session cleanly (a second one aborts).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from kernelpilot.agent.events import Event
from kernelpilot.agent.factory import build_session
from kernelpilot.agent.verdict_text import one_line
from kernelpilot.agent.watch import watch_command
from kernelpilot.dropin.provenance import apply_command, origin_line


class LogPrinter:
    """Readable log of Events."""

    def __init__(self, out: TextIO, replay: bool = False) -> None:
        self.out = out
        self.replay = replay
        self._in_text = False

    def _line(self, text: str) -> None:
        if self._in_text:
            self.out.write("\n")
            self._in_text = False
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, ev: Event) -> None:
        d = ev.to_dict()
        k = ev.kind
        if k == "session_started":
            self.replay = self.replay or d["replay"]
            self._line(f"kernelpilot session {d['session_id']}: {d['problem']} with {d['model']}")
            self._problem = str(d["problem"])
            if origin_line(Path(self._problem)):
                self._line(f"extracted from {origin_line(Path(self._problem))}")
            if self.replay:
                self._line("REPLAY: the assistant turns below are replayed from a file, not produced by a live model.")
            if d["worktree"]:
                self._line(f"worktree {d['worktree']} (branch {d['branch']})")
        elif k == "text_delta":
            if not self._in_text:
                self.out.write("replay> " if self.replay else "agent> ")
                self._in_text = True
            self.out.write(d["text"])
            self.out.flush()
        elif k == "assistant_message":
            if self._in_text:
                self.out.write("\n")
                self._in_text = False
        elif k == "tool_call_started":
            args = json.dumps(d["arguments"])
            self._line(f"  -> {d['name']}({args[:160] + '…' if len(args) > 160 else args})")
        elif k == "tool_call_finished":
            lines = d["result"].splitlines() or [""]
            mark = "ok" if d["ok"] else "FAILED"
            self._line(f"  <- {d['name']} {mark} ({d['seconds']:.1f} s): {lines[0][:200]}")
            for extra in lines[1:6]:
                self._line(f"       {extra[:200]}")
            if len(lines) > 6:
                self._line(f"       … {len(lines) - 6} more lines")
        elif k == "candidate_evaluated":
            self._line(f"candidate {d['candidate_id']}: {one_line(d['verdict'])}")
        elif k == "proposal_ready":
            self._line(f"PROPOSAL {d['candidate_id']}: {d['summary']}")
        elif k == "proposal_approved":
            self._line(f"APPROVED {d['candidate_id']}: commit {d['commit'][:12]} in your repository")
            command = apply_command(Path(getattr(self, "_problem", "")))
            if command:
                self._line(f"  apply it to your model: {command}")
        elif k == "proposal_rejected":
            self._line(f"REJECTED {d['candidate_id']}: {d['reason']}")
        elif k == "engineer_message":
            self._line(f"engineer> {d['text']}")
        elif k == "budget_reached":
            self._line(f"budget reached: {d['budget']} ({d['used']} of {d['limit']})")
        elif k == "error":
            self._line(f"error: {d['message']}")
        elif k == "usage":
            self._usage = d
        elif k == "done":
            usage = getattr(self, "_usage", None)
            spent = f"; {usage['total_tokens']} tokens, ${usage['total_cost_usd']:.4f}" if usage else ""
            best = f"; best {d['best_candidate']}" if d["best_candidate"] else ""
            approved = f"; approved commit {d['approved_commit'][:12]}" if d["approved_commit"] else ""
            self._line(f"done ({d['reason']}){best}{approved}{spent}" + (" [replay]" if self.replay else ""))


def jsonl_printer(out: TextIO) -> Any:
    def emit(ev: Event) -> None:
        out.write(json.dumps(ev.to_dict(), default=str) + "\n")
        out.flush()

    return emit


async def drive(session: Any, emit: Any) -> None:
    loop = asyncio.get_running_loop()
    installed = False
    try:
        loop.add_signal_handler(signal.SIGINT, session.cancel)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        pass
    try:
        async for event in session.run():
            emit(event)
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
        closer = getattr(session.evaluator, "close", None)
        if callable(closer):
            try:
                closer()
            except Exception:  # noqa: BLE001
                pass


def run_command(args: Any, out: TextIO | None = None) -> int:
    if getattr(args, "watch", False):
        return watch_command(args, out=out)
    out = out or sys.stdout
    session = build_session(args)
    emit = jsonl_printer(out) if getattr(args, "jsonl", False) else LogPrinter(out)
    asyncio.run(drive(session, emit))
    if not getattr(args, "jsonl", False):
        out.write(f"transcript: {session.transcript.path}  (continue with --resume {session.session_id}; remove the "
                  f"session's worktree and branch with `kernelpilot sessions rm {session.session_id}`)\n")
    if getattr(args, "replay", None):  # a replay succeeds when it was played to its end
        return 0 if session.done is not None and session.done.reason in ("finished", "proposal_approved") else 1
    return 0 if session.book.approved else 1
