"""Approve, reject and open-in-editor, called from the review screen (app mixin)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpilot.tui.diffview import parse_unified
from kernelpilot.tui.orient import edit_target
from kernelpilot.tui.widgets.candidates import CandidateRecord

if TYPE_CHECKING:
    from kernelpilot.tui.problem_card import CardFacts
    from kernelpilot.tui.session import SessionRunner
    from kernelpilot.tui.startup import Startup


class ReviewActions:
    """Mixed into KernelpilotApp."""

    startup: Startup | None
    runner: SessionRunner | None
    panel: Any
    busy: Any
    notify: Any
    suspend: Any
    report_error: Any
    card_facts: CardFacts | None

    async def approve_candidate(self, candidate_id: str, confirmed: str = "") -> str | None:
        """Approve through the session (``confirmed``: the verdict status the engineer confirmed)."""
        if self.runner is None:
            self.notify("The session has not started yet.", severity="warning")
            return None
        self.busy.start("approve", f"approving {candidate_id}")
        try:
            result = await self.runner.call("approve", candidate_id, confirmed)
        except Exception as err:
            await self.report_error("approve", err)
            return None
        finally:
            self.busy.stop("approve")
        commit = result if isinstance(result, str) else getattr(result, "commit", "") or ""
        if commit:
            self.panel.set_state(candidate_id, "approved", approved_commit=commit)
        return commit

    async def reject_candidate(self, candidate_id: str, reason: str) -> None:
        if self.runner is None:
            return
        try:
            await self.runner.call("reject", candidate_id, reason)
        except Exception as err:
            await self.report_error("reject", err)
            return
        self.panel.set_state(candidate_id, "rejected", reason=reason)

    def editor_files(self, record: CandidateRecord | None) -> list[Path]:
        s = self.startup
        root = s.worktree if s and s.worktree else None
        files: list[Path] = []
        if record is not None and root is not None:
            files = [root / f.path for f in parse_unified(record.diff) if (root / f.path).is_file()]
        if not files and s and s.watch_dir and s.watch_dir.is_dir():
            files = sorted(p for p in s.watch_dir.iterdir() if p.suffix in (".cu", ".cuh", ".cpp", ".py"))
        return files

    def edit_target_file(self) -> Path | None:
        """The file the problem card names (absolute, in the worktree); found again if it is not there yet."""
        facts = self.card_facts
        if facts is not None and facts.edit_file and Path(facts.edit_file).is_file():
            return Path(facts.edit_file)
        found = edit_target(self.startup)[0] if self.startup is not None else ""
        if found and facts is not None:
            facts.edit_file = found  # the card (/problem) names it from now on
        return Path(found) if found else None

    def open_edit_target(self) -> None:
        target = self.edit_target_file()
        if target is None:
            where = (self.card_facts.edit_dir if self.card_facts and self.card_facts.edit_dir
                     else "the candidate directory")
            self.notify(f"No candidate file yet: write model_new.py, binding.cpp and a .cu kernel in {where}/.",
                        severity="warning")
            return
        self._run_editor([target])

    def open_in_editor(self, record: CandidateRecord | None) -> None:
        files = self.editor_files(record)
        if not files:
            self.notify("No candidate files to open.", severity="warning")
            return
        self._run_editor(files)

    def _run_editor(self, files: list[Path]) -> None:
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            with self.suspend():
                subprocess.run([*shlex.split(editor), *map(str, files)], check=False)
        except Exception as err:  # headless or no editor: say so, and which file to open by hand; never crash
            self.notify(f"Could not open {editor}: {err} Open {', '.join(map(str, files))} yourself.", severity="error")

