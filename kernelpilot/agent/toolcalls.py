"""Accumulate streamed tool calls from providers that stream them badly.

Defends against: missing ids (synthesised), several calls streamed at one index (split when a new
id, or a new name after a complete call, arrives), arguments sent as a dict or as JSON string
fragments, and invalid JSON (the call carries an ``error`` the loop returns to the model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.agent.llm import ToolCall, new_call_id


@dataclass
class _Partial:
    index: int | None
    id: str | None = None
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    args_dict: dict[str, Any] | None = None

    def args_complete(self) -> bool:
        if self.args_dict is not None:
            return True
        text = "".join(self.fragments).strip()
        if not text:
            return False
        try:
            json.loads(text)
        except ValueError:
            return False
        return True


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str]:
    """Return (arguments, error). ``raw`` is a dict, a JSON string or None."""
    if raw is None:
        return {}, ""
    if isinstance(raw, dict):
        return raw, ""
    text = str(raw).strip()
    if not text:
        return {}, ""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}); send one JSON object"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {type(value).__name__}"
    return value, ""


class ToolCallAccumulator:
    def __init__(self) -> None:
        self._calls: list[_Partial] = []
        self._current: dict[int | None, _Partial] = {}

    def add(self, index: int | None, call_id: str | None, name: str | None, arguments: Any) -> None:
        call_id = call_id or None
        name = name or ""
        cur = self._find(index, call_id)
        if cur is None or self._starts_new(cur, call_id, name):
            cur = _Partial(index=index, id=call_id)
            self._calls.append(cur)
            self._current[index] = cur
        if call_id and not cur.id:
            cur.id = call_id
        if name and not cur.name:
            cur.name = name
        if isinstance(arguments, dict):
            cur.args_dict = {**(cur.args_dict or {}), **arguments}
        elif arguments:
            cur.fragments.append(str(arguments))

    def _find(self, index: int | None, call_id: str | None) -> _Partial | None:
        if call_id:
            for p in self._calls:
                if p.id == call_id:
                    return p
        if index is None:
            return self._calls[-1] if self._calls else None
        return self._current.get(index)

    @staticmethod
    def _starts_new(cur: _Partial, call_id: str | None, name: str) -> bool:
        if call_id and cur.id and call_id != cur.id:
            return True
        if name and cur.name:
            # A named call with an id after one without: a different call at the same index.
            if call_id and not cur.id:
                return True
            # A second name with no id to tell them apart: a new call once the current one has
            # complete arguments (Ollama sends whole calls, all at index 0).
            if not call_id and cur.args_complete():
                return True
        return False

    def finish(self) -> list[ToolCall]:
        out: list[ToolCall] = []
        for p in self._calls:
            if not p.name and not p.fragments and p.args_dict is None:
                continue
            raw = "".join(p.fragments)
            if p.args_dict is not None and not raw.strip():
                args, error = p.args_dict, ""
            else:
                args, error = parse_arguments(raw)
                if not error and p.args_dict:
                    args = {**p.args_dict, **args}
            if not p.name:
                error = error or "the tool call has no function name"
            out.append(
                ToolCall(
                    id=p.id or new_call_id(),
                    name=p.name or "unknown",
                    arguments=args,
                    error=error,
                    raw_arguments=raw if error else "",
                )
            )
        return out
