"""Session transcripts: JSONL under ``<data dir>/sessions/<id>.jsonl``, enough to resume a session.

The data dir is ``$KERNELPILOT_DATA_DIR`` or platformdirs' ``user_data_dir("kernelpilot")``. One
JSON object per line, each with a ``type``:

- ``header``: session id, problem path, project root, model label, candidate dir, creation time;
- ``event``: every Event except the streamed ``text_delta`` pieces (the full text is in
  ``assistant_message``);
- ``message``: every conversation message (OpenAI format) as appended;
- ``candidate``: a benchmarked candidate's record (verdict, commit, files hash).

Everything written is redacted with ``kernelpilot.redact.redact_obj`` (API keys, tokens).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kernelpilot.agent.candidates import CandidateRecord
from kernelpilot.agent.events import Event, event_from_dict
from kernelpilot.errors import KernelpilotError
from kernelpilot.redact import redact_obj


class TranscriptError(KernelpilotError):
    """A transcript is missing or unreadable."""

    kind = "bad_transcript"


def data_dir() -> Path:
    override = os.environ.get("KERNELPILOT_DATA_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("kernelpilot"))


def sessions_dir() -> Path:
    return data_dir() / "sessions"


def transcript_path(session_id: str) -> Path:
    return sessions_dir() / f"{session_id}.jsonl"


def find_transcript(session: str) -> Path:
    """A session id, or a path to a transcript file."""
    as_path = Path(session).expanduser()
    if as_path.suffix == ".jsonl" and as_path.is_file():
        return as_path
    path = transcript_path(session)
    if path.is_file():
        return path
    known = sorted(p.stem for p in sessions_dir().glob("*.jsonl")) if sessions_dir().is_dir() else []
    hint = f" Recent sessions: {', '.join(known[-5:])}." if known else ""
    raise TranscriptError(f"no transcript for session {session!r} in {sessions_dir()}; pass a session id or a .jsonl "
                          f"path.{hint}")


@dataclass
class TranscriptState:
    header: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    candidates: list[CandidateRecord] = field(default_factory=list)


class Transcript:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fh: IO[str] | None = None

    @classmethod
    def for_session(cls, session_id: str) -> Transcript:
        return cls(transcript_path(session_id))

    @property
    def exists(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(redact_obj(record), default=str) + "\n")
        self._fh.flush()

    def write_header(self, **fields: Any) -> None:
        self._write({"type": "header", "created": time.time(), **fields})

    def write_event(self, event: Event) -> None:
        if event.kind == "text_delta":
            return
        self._write({"type": "event", "event": event.to_dict()})

    def write_message(self, message: dict[str, Any]) -> None:
        self._write({"type": "message", "message": message})

    def write_candidate(self, record: CandidateRecord) -> None:
        self._write({"type": "candidate", "record": record.to_dict()})

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def load(self) -> TranscriptState:
        state = TranscriptState()
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise TranscriptError(f"cannot read transcript {self.path}: {exc.strerror}; check the path.") from exc
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                if lineno == len(lines):
                    continue  # a line cut short by a crash: ignore it
                raise TranscriptError(f"{self.path}:{lineno} is not valid JSON; the transcript is damaged.") from None
            kind = rec.get("type")
            if kind == "header":
                if not state.header:
                    state.header = rec
                else:
                    state.header.update({k: v for k, v in rec.items() if k != "created"})
            elif kind == "message":
                state.messages.append(rec["message"])
            elif kind == "event":
                try:
                    state.events.append(event_from_dict(rec["event"]))
                except (KeyError, TypeError):
                    continue  # an event kind this version does not know
            elif kind == "candidate":
                state.candidates.append(CandidateRecord(**rec["record"]))
        return state
