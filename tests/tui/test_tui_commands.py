"""Slash commands in the input box and the command palette."""

from __future__ import annotations

from typing import Any

from textual.command import CommandPalette

from kernelpilot.tui.app import KernelpilotApp
from kernelpilot.tui.commands import SLASH_COMMANDS, parse
from kernelpilot.tui.session import EventStreamSession
from kernelpilot.tui.startup import Startup
from tui_support import GPU, conversation_text, script, wait_for


def make_app(model: str = "anthropic/claude-sonnet-4-5") -> tuple[KernelpilotApp, EventStreamSession]:
    session = EventStreamSession(script()[:5])
    startup = Startup(session=session, model=model,
                      budgets={"max_turns": 40, "max_tokens": 2_000_000, "max_cost_usd": 5.0, "max_wall_s": 3600})
    return KernelpilotApp(startup, gpu_source=GPU), session


async def type_command(pilot: Any, text: str) -> None:
    await pilot.click("#prompt")
    await pilot.press(*text, "enter")
    await pilot.pause(0.1)


def test_parse() -> None:
    assert parse("/skill  memory-bound-kernels ") == ("skill", "memory-bound-kernels")
    assert parse("/HELP") == ("help", "")
    assert {c.name for c in SLASH_COMMANDS} >= {"model", "budget", "skills", "skill", "profile", "revert",
                                                "cost", "help", "quit"}


async def test_help_cost_budget_model_and_unknown() -> None:
    app, session = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_for(pilot, lambda: app.tokens == 1800, what="usage event")
        await type_command(pilot, "/help")
        await wait_for(pilot, lambda: "/revert ID" in conversation_text(app), what="help")
        text = conversation_text(app)
        assert "`/skill NAME`" in text and "ctrl+q" in text.lower() and "review: Approve" in text

        await type_command(pilot, "/cost")
        await wait_for(pilot, lambda: "Cost so far: $0.0120" in conversation_text(app), what="cost")
        assert "1,500 prompt, 300 completion" in conversation_text(app)

        await type_command(pilot, "/budget")
        await wait_for(pilot, lambda: "turns: 1 of 40" in conversation_text(app), what="budget")
        assert "cost: $0.01 of $5.00" in conversation_text(app)

        await type_command(pilot, "/model")
        await wait_for(pilot, lambda: "Model: anthropic/claude-sonnet-4-5" in conversation_text(app))
        await type_command(pilot, "/model openai/gpt-5")
        await wait_for(pilot, lambda: "kernelpilot --model openai/gpt-5" in conversation_text(app))

        await type_command(pilot, "/cots")
        await wait_for(pilot, lambda: "Unknown command /cots; did you mean /cost?" in conversation_text(app))
        await type_command(pilot, "/revert")
        await wait_for(pilot, lambda: "Usage: /revert ID" in conversation_text(app))
        assert session.sent == []  # commands never go to the agent as messages


async def test_skills_and_skill() -> None:
    from kernelpilot import skills

    names = [s.name for s in skills.load_index()]
    app, _ = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        await type_command(pilot, "/skills")
        await wait_for(pilot, lambda: f"`{names[0]}`" in conversation_text(app), what="skills list")
        await type_command(pilot, f"/skill {names[0]}")
        body = skills.read_skill(names[0])
        first_line = next(line for line in body.splitlines() if line.strip())
        await wait_for(pilot, lambda: first_line in conversation_text(app), what="skill text")
        await type_command(pilot, "/skill no-such-skill")
        await wait_for(pilot, lambda: "no-such-skill" in conversation_text(app).split(first_line)[-1])


async def test_profile_asks_the_agent_and_quit_command_exits() -> None:
    app, session = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        await type_command(pilot, "/profile c9")
        await wait_for(pilot, lambda: bool(session.sent), what="profile request")
        assert "profile candidate c9" in session.sent[0]
        await type_command(pilot, "/quit")
        await wait_for(pilot, lambda: not app.is_running, what="exit")
    assert session.cancelled


async def test_manual_mode_messages_explain_how_to_configure_a_model() -> None:
    app, session = make_app(model="")
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_for(pilot, lambda: app.startup is not None)
        await type_command(pilot, "make it faster")
        await wait_for(pilot, lambda: "No model is configured" in conversation_text(app))
        assert "--model" in conversation_text(app)
        assert session.sent == []


async def test_command_palette_lists_the_slash_commands() -> None:
    app, _ = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        await pilot.press(*"cost")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Cost so far" in conversation_text(app), what="palette ran /cost")
