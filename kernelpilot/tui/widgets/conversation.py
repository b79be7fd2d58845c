"""The conversation pane: the agent's streamed Markdown, tool calls as collapsible entries, notes."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

TOOL_PREVIEW = 200


def _args_preview(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value)
        text = text.replace("\n", "⏎")
        parts.append(f"{key}={text[:40]}{'…' if len(text) > 40 else ''}")
    return ", ".join(parts)


class ToolEntry(Collapsible):
    """One tool call: a one-line title, expandable to the arguments and the full output."""

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        self.call_id = call_id
        self.tool_name = name
        self.arguments = arguments
        self._args = Static(Text(json.dumps(arguments, indent=2)), classes="tool-args")
        self._result = Static(Text("running…", style="dim"), classes="tool-result")
        super().__init__(self._args, self._result, title=self._make_title("…"), collapsed=True,
                         classes="tool-entry")

    def _make_title(self, state: str) -> str:
        return f"{state} {self.tool_name}({_args_preview(self.arguments)})"

    def finish(self, result: str, ok: bool, seconds: float) -> None:
        mark = "✓" if ok else "✗"
        first = result.strip().splitlines()[0] if result.strip() else ""
        first = first[:80] + ("…" if len(first) > 80 else "")
        self.title = self._make_title(mark) + f" {seconds:.1f}s" + (f" — {first}" if first else "")
        self._result.update(Text(result, style="" if ok else "red"))
        self.set_class(not ok, "-failed")


class ConversationPane(VerticalScroll):
    """Appends entries at the bottom and stays anchored there while the user has not scrolled up."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._md: Markdown | None = None
        self._stream: MarkdownStream | None = None
        self._streamed = ""
        self._tools: dict[str, ToolEntry] = {}

    def compose(self) -> Any:
        # Fills the space below short logs, so the anchored log still starts at the top.
        yield Static("", id="conversation-fill")

    def on_mount(self) -> None:
        self.anchor()

    async def mount_entry(self, widget: Any) -> None:
        if not self.is_attached or self._closing or self._pruning:
            return  # the app is shutting down: late events are in the transcript, not on screen
        await self.mount(widget, before="#conversation-fill")

    # ---- assistant text ------------------------------------------------------------------
    async def append_delta(self, text: str) -> None:
        if not self.is_attached:
            return
        if self._md is None:
            self._md = Markdown("", classes="assistant")
            await self.mount_entry(self._md)
            self._stream = Markdown.get_stream(self._md)
            self._streamed = ""
        self._streamed += text
        assert self._stream is not None
        await self._stream.write(text)

    async def end_message(self, full_text: str | None = None) -> None:
        """Close the current assistant message; show ``full_text`` if nothing was streamed."""
        if self._stream is not None:
            await self._stream.stop()
        md, streamed = self._md, self._streamed
        self._md, self._stream, self._streamed = None, None, ""
        if full_text is None or not full_text.strip():
            return
        if md is None:
            await self.mount_entry(Markdown(full_text, classes="assistant"))
        elif streamed != full_text:
            await md.update(full_text)

    # ---- tools ---------------------------------------------------------------------------
    async def tool_started(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        await self.end_message()
        entry = ToolEntry(call_id, name, arguments)
        self._tools[call_id] = entry
        await self.mount_entry(entry)

    async def tool_finished(self, call_id: str, name: str, result: str, ok: bool, seconds: float) -> None:
        entry = self._tools.get(call_id)
        if entry is None:
            entry = ToolEntry(call_id, name, {})
            self._tools[call_id] = entry
            await self.mount_entry(entry)
        entry.finish(result, ok, seconds)

    def tool_entries(self) -> list[ToolEntry]:
        return list(self._tools.values())

    # ---- other lines ---------------------------------------------------------------------
    async def note(self, text: str | Text, kind: str = "info") -> Static:
        """A one-off line: kind is info | engineer | error | warning | candidate | system."""
        await self.end_message()
        widget = Static(text, classes=f"note -{kind}")
        await self.mount_entry(widget)
        return widget

    async def note_markdown(self, text: str, kind: str = "info") -> Markdown:
        await self.end_message()
        widget = Markdown(text, classes=f"note -{kind}")
        await self.mount_entry(widget)
        return widget
