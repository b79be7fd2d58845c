"""Keep a long conversation inside the model's context: elide old tool output, never the recent turns.

The estimate is characters / 4. Oldest first, tool results longer than a short head are cut to that
head plus ``[… N chars of old tool output elided …]``; then large tool-call arguments of old
assistant turns (whole files sent to write_file) get the same treatment inside valid JSON. The
system prompt (problem, rules, best verdict so far) is not part of ``messages`` and is never cut.
The stored conversation is not modified: this works on a copy for each request.
"""

from __future__ import annotations

import copy
import json
from typing import Any

KEEP_HEAD_CHARS = 400
MARKER = "[… {n} chars of old tool output elided …]"


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        total += len(str(m.get("content") or ""))
        for tc in m.get("tool_calls") or []:
            total += len(str((tc.get("function") or {}).get("arguments") or ""))
    return total // 4


def _elide_text(text: str) -> tuple[str, int]:
    if len(text) <= KEEP_HEAD_CHARS + 80:
        return text, 0
    cut = len(text) - KEEP_HEAD_CHARS
    return text[:KEEP_HEAD_CHARS] + "\n" + MARKER.format(n=cut), cut


def _elide_arguments(raw: str) -> tuple[str, int]:
    try:
        args = json.loads(raw)
    except ValueError:
        short, cut = _elide_text(raw)
        return (json.dumps({"elided": short}) if cut else raw), cut
    if not isinstance(args, dict):
        return raw, 0
    saved = 0
    for key, value in args.items():
        if isinstance(value, str) and len(value) > KEEP_HEAD_CHARS + 80:
            args[key], cut = _elide_text(value)
            saved += cut
    return (json.dumps(args) if saved else raw), saved


def compact(messages: list[dict[str, Any]], limit_tokens: int, keep_recent: int = 6) -> list[dict[str, Any]]:
    """A copy of ``messages`` that fits ``limit_tokens`` as far as eliding old tool output allows."""
    if limit_tokens <= 0 or estimate_tokens(messages) <= limit_tokens:
        return messages
    out = copy.deepcopy(messages)
    over = (estimate_tokens(out) - limit_tokens) * 4
    old = range(max(0, len(out) - keep_recent))
    for i in old:  # pass 1: tool results, oldest first
        if over <= 0:
            break
        if out[i].get("role") == "tool":
            out[i]["content"], cut = _elide_text(str(out[i].get("content") or ""))
            over -= cut
    for i in old:  # pass 2: big arguments of old tool calls (whole files)
        if over <= 0:
            break
        for tc in out[i].get("tool_calls") or []:
            fn = tc.get("function") or {}
            fn["arguments"], cut = _elide_arguments(str(fn.get("arguments") or ""))
            over -= cut
    return out
