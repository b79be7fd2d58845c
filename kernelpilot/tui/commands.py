"""Slash commands typed in the input box, and the command-palette provider that lists them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from kernelpilot.tui.app import KernelpilotApp


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    help: str
    needs_arg: bool = False


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("problem", "/problem", "the problem card: shapes, bytes, FLOPs, floor, eager and torch.compile times"),
    SlashCommand("model", "/model [NAME]", "show the model, or switch to NAME (litellm model string)"),
    SlashCommand("budget", "/budget", "budgets of this session and what has been used"),
    SlashCommand("skills", "/skills", "list the skills the agent can read"),
    SlashCommand("skill", "/skill NAME", "show one skill", needs_arg=True),
    SlashCommand("profile", "/profile [ID]", "profile a candidate (default: the best one)"),
    SlashCommand("inductor", "/inductor", "start from torch.compile's own kernels: a runnable Triton candidate"),
    SlashCommand("revert", "/revert ID", "put candidate ID's files back in the worktree", needs_arg=True),
    SlashCommand("cost", "/cost", "tokens and cost so far"),
    SlashCommand("help", "/help", "commands and keys"),
    SlashCommand("quit", "/quit", "cancel the session cleanly and leave"),
)
BY_NAME = {c.name: c for c in SLASH_COMMANDS}


def parse(text: str) -> tuple[str, str]:
    """'/skill  tiling ' -> ('skill', 'tiling')."""
    body = text.strip().removeprefix("/")
    name, _, arg = body.partition(" ")
    return name.lower(), arg.strip()


def help_text(key_lines: list[tuple[str, str]]) -> str:
    rows = ["**Commands**", ""]
    rows += [f"- `{c.usage}` — {c.help}" for c in SLASH_COMMANDS]
    rows += ["", "**Keys**", ""]
    rows += [f"- `{key}` — {desc}" for key, desc in key_lines]
    rows += ["", "Anything else you type is sent to the agent."]
    return "\n".join(rows)


class SlashCommandProvider(Provider):
    """Lists the slash commands in the command palette (ctrl+p)."""

    @property
    def kp(self) -> KernelpilotApp:
        return self.app  # type: ignore[return-value]

    async def discover(self) -> Hits:
        for cmd in SLASH_COMMANDS:
            yield DiscoveryHit(cmd.usage, partial(self.kp.pick_command, cmd.name), help=cmd.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for cmd in SLASH_COMMANDS:
            text = f"{cmd.usage} {cmd.help}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(cmd.usage), partial(self.kp.pick_command, cmd.name),
                          help=cmd.help)
