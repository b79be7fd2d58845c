"""ScriptedClient: replays assistant turns from a JSONL file, for tests and demos.

One JSON object per line: ``{"text": "...", "tool_calls": [{"name": ..., "arguments": {...}}]}``
(``id`` optional; ``arguments`` may also be a JSON string). ``${candidate_dir}`` in text and in
string arguments is replaced by the session's candidate directory, so one replay file runs in any
project layout. Blank lines and lines starting with
``//`` are skipped. Text is streamed in small deltas. When the script is exhausted the client
returns a turn with ``finish_reason="end_of_script"`` and the loop ends the session cleanly. The
label is always ``"replay: <file name>"`` so every front-end can say it is not a live model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kernelpilot.agent.llm import Chunk, TextChunk, ToolCall, Turn, TurnUsage, new_call_id
from kernelpilot.agent.toolcalls import parse_arguments
from kernelpilot.errors import KernelpilotError


class ScriptError(KernelpilotError):
    """The replay file is missing or malformed."""

    kind = "bad_replay"


def load_script(path: Path) -> list[dict[str, Any]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ScriptError(f"Cannot read replay file {path}: {exc.strerror}; pass an existing JSONL file to "
                          "--replay.") from exc
    turns: list[dict[str, Any]] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ScriptError(f"{path}:{lineno} is not valid JSON ({exc.msg}); write one JSON object per "
                              "line.") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("tool_calls", []), list):
            raise ScriptError(f"{path}:{lineno} must be an object with optional \"text\" and \"tool_calls\" (a list).")
        turns.append(obj)
    return turns


class ScriptedClient:
    def __init__(
        self,
        source: Path | str | list[dict[str, Any]],
        *,
        chunk_chars: int = 12,
        delay_s: float = 0.0,
        name: str | None = None,
    ) -> None:
        if isinstance(source, list):
            self.turns = list(source)
            name = name or "inline script"
        else:
            self.turns = load_script(Path(source))
            name = name or Path(source).name
        self.label = f"replay: {name}"
        self.position = 0
        self.chunk_chars = max(1, chunk_chars)
        self.delay_s = delay_s
        self.session_usage = TurnUsage()
        self.requests: list[list[dict[str, Any]]] = []  # the messages of every request, for tests
        self.variables: dict[str, str] = {}  # ${name} substitutions (the loop sets candidate_dir)

    def _subst(self, text: str) -> str:
        for name, value in self.variables.items():
            text = text.replace("${" + name + "}", value)
        return text

    def skip(self, turns: int) -> None:
        """Skip turns already played (used when a replayed session is resumed)."""
        self.position = min(len(self.turns), self.position + max(0, turns))

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[Chunk]:
        self.requests.append([dict(m) for m in messages])
        if self.position >= len(self.turns):
            yield Turn(finish_reason="end_of_script")
            return
        spec = self.turns[self.position]
        self.position += 1
        text = self._subst(str(spec.get("text") or ""))
        for start in range(0, len(text), self.chunk_chars):
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            else:
                await asyncio.sleep(0)
            yield TextChunk(text[start : start + self.chunk_chars])
        calls: list[ToolCall] = []
        for tc in spec.get("tool_calls") or []:
            args, error = parse_arguments(tc.get("arguments"))
            args = {k: self._subst(v) if isinstance(v, str) else v for k, v in args.items()}
            raw = tc.get("arguments") if isinstance(tc.get("arguments"), str) else ""
            calls.append(
                ToolCall(id=str(tc.get("id") or new_call_id()), name=str(tc.get("name", "")),
                         arguments=args, error=error, raw_arguments=raw if error else "")
            )
        usage = spec.get("usage") or {}
        turn_usage = TurnUsage(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            cost_usd=float(usage.get("cost_usd", 0.0)),
        )
        self.session_usage.prompt_tokens += turn_usage.prompt_tokens
        self.session_usage.completion_tokens += turn_usage.completion_tokens
        self.session_usage.cost_usd += turn_usage.cost_usd
        yield Turn(text=text, tool_calls=calls, usage=turn_usage,
                   finish_reason="tool_calls" if calls else "stop")
