"""The one seam every LLM call goes through.

A client streams one assistant turn: zero or more :class:`TextChunk` deltas, then exactly one
:class:`Turn` with the full text, the tool calls and the usage. Two implementations exist:
``litellm_client.LiteLLMClient`` (any litellm model string) and ``scripted.ScriptedClient`` (replays
turns from a JSONL file; its ``label`` always starts with ``"replay: "``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kernelpilot.errors import KernelpilotError


class LLMError(KernelpilotError):
    """The model call failed (after retries where retrying makes sense)."""

    kind = "llm"

    def __init__(self, message: str, *, retryable: bool = False, kind: str = "") -> None:
        super().__init__(message)
        self.retryable = retryable
        if kind:
            self.kind = kind


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    # Set when the model sent arguments that are not a JSON object: the loop answers with a tool
    # error instead of running the tool.
    error: str = ""
    raw_arguments: str = ""

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-format entry for an assistant message's ``tool_calls``."""
        import json

        args = self.raw_arguments if self.error else json.dumps(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": args}}


@dataclass
class TurnUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Turn:
    """One complete assistant turn."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: TurnUsage = field(default_factory=TurnUsage)
    finish_reason: str = ""  # "stop", "tool_calls", "length", or "end_of_script" (replay exhausted)
    retries: int = 0  # how many times the call was retried before it succeeded

    @property
    def end_of_script(self) -> bool:
        return self.finish_reason == "end_of_script"

    def to_message(self) -> dict[str, Any]:
        # providers refuse an assistant message with neither content nor tool calls
        content = self.text or (None if self.tool_calls else "(no reply)")
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_message() for tc in self.tool_calls]
        return msg


@dataclass
class TextChunk:
    text: str


Chunk = TextChunk | Turn


@runtime_checkable
class LLMClient(Protocol):
    label: str  # the model name; replays are labelled "replay: <file>"

    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[Chunk]:
        """Stream one assistant turn: TextChunk deltas, then one Turn."""
        ...


def is_replay(client: LLMClient) -> bool:
    return str(getattr(client, "label", "")).startswith("replay:")
