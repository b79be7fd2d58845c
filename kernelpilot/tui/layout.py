"""The main screen's layout by terminal size: the conversation keeps priority (an app mixin).

- at least ``SIDE_MIN_WIDTH`` columns: the candidates panel beside the conversation, full width;
- narrower, with at least ``STACK_MIN_HEIGHT`` rows: the panel below the conversation;
- smaller still (an 80x24 terminal): the panel is hidden and its key (ctrl+t, ``candidates``) shows
  it below the conversation, and hides it again.
"""

from __future__ import annotations

from typing import Any

from textual import events

SIDE_MIN_WIDTH = 140
STACK_MIN_HEIGHT = 32
LAYOUTS = ("-side", "-stacked", "-hidden")


def layout_for(width: int, height: int) -> str:
    if width >= SIDE_MIN_WIDTH:
        return "-side"
    if height >= STACK_MIN_HEIGHT:
        return "-stacked"
    return "-hidden"


class ResponsiveLayout:
    """Mixed into KernelpilotApp."""

    query_one: Any
    panel: Any
    size: Any
    focused: Any

    @property
    def layout_name(self) -> str:
        main = self.query_one("#main")
        return next((c for c in LAYOUTS if main.has_class(c)), "-side").removeprefix("-")

    @property
    def candidates_visible(self) -> bool:
        main = self.query_one("#main")
        return not main.has_class("-hidden") or main.has_class("-peek")

    def apply_layout(self, width: int, height: int) -> None:
        main = self.query_one("#main")
        name = layout_for(width, height)
        for c in LAYOUTS:
            main.set_class(c == name, c)

    def on_resize(self, event: events.Resize) -> None:
        self.apply_layout(event.size.width, event.size.height)

    def action_focus_table(self) -> None:
        """The candidates key: show (or hide) the panel where it is hidden, else move focus to it and back."""
        main = self.query_one("#main")
        table = self.panel.table
        if main.has_class("-hidden"):
            main.toggle_class("-peek")
            if main.has_class("-peek"):
                table.focus()
            else:
                self.query_one("#prompt").focus()
        elif self.focused is table:
            self.query_one("#prompt").focus()
        else:
            table.focus()
