"""What a running suite shows: a rich progress bar (ETA, done, pass, faster than torch.compile so far), or
one JSON line per event with ``--jsonl``. Its total is the jobs this call covers (the chosen ones: every
planned job unless --levels, --problems or --limit narrow it)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO


class Progress:
    def __init__(self, total: int, *, already: int = 0, jsonl: bool = False, out: TextIO | None = None,
                 planned: int | None = None, left: int = 0) -> None:
        """``total``: the jobs this call covers (``already`` of them had a verdict); ``planned``: the run's
        planned jobs; ``left``: planned jobs without a verdict that this call does not run (--levels,
        --problems, --limit)."""
        self.total, self.done, self.passed, self.faster = total, already, 0, 0
        self.jsonl = jsonl
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        if jsonl:
            self.event("suite_started", total=total, already_done=already,
                       planned=total if planned is None else planned, left_for_later=left)
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeRemainingColumn

            self._bar = Bar(TextColumn("[bold]suite"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[tally]}"),
                            TextColumn("ETA"), TimeRemainingColumn(), transient=False)
            self._bar.start()
            self._task = self._bar.add_task("suite", total=total, completed=already, tally=self._tally())

    def _tally(self) -> str:
        return f"pass {self.passed}, faster than compile {self.faster}"

    def event(self, kind: str, **data: Any) -> None:
        self.out.write(json.dumps({"event": kind, "time": round(time.time(), 3), **data}, default=str) + "\n")
        self.out.flush()

    def result(self, job: Any, status: str, verdict: Any) -> None:
        with self._lock:
            self.done += 1
            perf = getattr(verdict, "performance", None)
            speedup = getattr(perf, "speedup_vs_compile", None) if perf is not None else None
            self.passed += status == "ok"
            self.faster += bool(status == "ok" and speedup and speedup > 1.0)
            if self.jsonl:
                self.event("verdict", job=job.key, problem=job.problem.key, sample=job.sample, status=status,
                           speedup_vs_compile=speedup, summary=getattr(verdict, "summary", ""),
                           done=self.done, total=self.total)
            elif self._bar is not None:
                self._bar.update(self._task, completed=self.done, tally=self._tally())

    def close(self, **summary: Any) -> None:
        if self.jsonl:
            self.event("suite_finished", **summary)
        elif self._bar is not None:
            self._bar.stop()
