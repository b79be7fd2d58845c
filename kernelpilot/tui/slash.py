"""What each slash command does (the list and the palette live in ``commands``)."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from textual.binding import Binding

from kernelpilot import skills
from kernelpilot.agent.evaltools import write_inductor_candidate
from kernelpilot.errors import KernelpilotError
from kernelpilot.tui.commands import BY_NAME, help_text, parse
from kernelpilot.tui.review import ReviewScreen
from kernelpilot.tui.verdict_view import speedup

if TYPE_CHECKING:
    from kernelpilot.tui.app import KernelpilotApp

Handler = Callable[["KernelpilotApp", str], Awaitable[None]]


async def run_slash(app: KernelpilotApp, text: str) -> None:
    name, arg = parse(text)
    cmd = BY_NAME.get(name)
    if cmd is None:
        close = difflib.get_close_matches(name, list(BY_NAME), n=1)
        hint = f"; did you mean /{close[0]}?" if close else ""
        await app.conversation.note(f"Unknown command /{name}{hint} Type /help for the list.", "warning")
        return
    if cmd.needs_arg and not arg:
        await app.conversation.note(f"Usage: {cmd.usage} — {cmd.help}", "warning")
        return
    await HANDLERS[name](app, arg)


def _session_has(app: KernelpilotApp, method: str) -> bool:
    return app.runner is not None and callable(getattr(app.runner.session, method, None))


async def _model(app: KernelpilotApp, arg: str) -> None:
    s = app.startup
    current = s.model if s and s.model else "none (manual mode)"
    if not arg:
        await app.conversation.note(f"Model: {current}", "system")
        return
    if _session_has(app, "set_model"):
        assert app.runner is not None and s is not None
        await app.runner.call("set_model", arg)
        s.model = arg
        app.status.set_model(arg, s.replay)
        await app.conversation.note(f"Model switched to {arg}", "system")
        return
    await app.conversation.note(
        f"This session cannot switch models while it runs (model: {current}); restart with "
        f"kernelpilot --model {arg}, or set model = \"{arg}\" in kernelpilot.toml.", "warning")


async def _budget(app: KernelpilotApp, arg: str) -> None:
    b = app.startup.budgets if app.startup else {}
    elapsed = app._clock() - app.started_at
    lines = ["**Budgets**", ""]
    lines.append(f"- turns: {app.turns} of {b.get('max_turns', '∞')}")
    lines.append(f"- tokens: {app.tokens:,} of {int(b['max_tokens']):,}" if b.get("max_tokens")
                 else f"- tokens: {app.tokens:,}")
    lines.append(f"- cost: ${app.cost:.2f} of ${float(b['max_cost_usd']):.2f}" if "max_cost_usd" in b
                 else f"- cost: ${app.cost:.2f}")
    lines.append(f"- wall time: {elapsed / 60:.0f} min of {float(b['max_wall_s']) / 60:.0f} min"
                 if b.get("max_wall_s") else f"- wall time: {elapsed / 60:.0f} min")
    await app.conversation.note_markdown("\n".join(lines), "system")


async def _cost(app: KernelpilotApp, arg: str) -> None:
    await app.conversation.note(
        f"Cost so far: ${app.cost:.4f} — {app.tokens:,} tokens "
        f"({app.prompt_tokens:,} prompt, {app.completion_tokens:,} completion)", "system")


async def _skills(app: KernelpilotApp, arg: str) -> None:
    def load() -> list[tuple[str, str]]:
        return [(s.name, s.description) for s in skills.load_index()]

    found = await asyncio.to_thread(load)
    if not found:
        await app.conversation.note("No skills found.", "warning")
        return
    body = "\n".join(f"- `{name}` — {desc}" for name, desc in found)
    await app.conversation.note_markdown(f"**Skills** (show one with `/skill NAME`)\n\n{body}", "system")


async def _skill(app: KernelpilotApp, arg: str) -> None:
    def read() -> str:
        return skills.read_skill(arg)

    try:
        text = await asyncio.to_thread(read)
    except KernelpilotError as err:
        await app.conversation.note(str(err), "warning")
        return
    await app.conversation.note_markdown(text, "skill")


def _best(app: KernelpilotApp) -> str | None:
    scored = [(speedup(r.verdict), cid) for cid, r in app.panel.records.items()]
    scored = [x for x in scored if x[0] > 0]
    return max(scored)[1] if scored else None


async def _profile(app: KernelpilotApp, arg: str) -> None:
    target = arg or _best(app)
    if target is None:
        await app.conversation.note("No correct candidate to profile yet; give an ID: /profile ID", "warning")
        return
    if _session_has(app, "profile"):
        assert app.runner is not None
        await app.runner.call("profile", target)
        return
    s = app.startup
    if s is None or s.manual:
        await app.conversation.note(
            f"Profiling goes through the agent; with no model, run `kernelpilot hotspots` on candidate "
            f"{target}'s files in a shell.", "warning")
        return
    await app.send_to_agent(f"Please profile candidate {target} (hotspots and the speed-of-light gap) "
                            "and tell me what limits it.")


async def _inductor(app: KernelpilotApp, arg: str) -> None:
    s = app.startup
    if s is not None and not s.manual:
        await app.send_to_agent("Call the inductor tool: start from torch.compile's own kernels as a Triton candidate, "
                                "benchmark it, and tell me how far it is from the speed of light.")
        return
    problem = getattr(getattr(s, "edit_evaluator", None), "problem", None) if s else None
    if s is None or s.watch_dir is None or problem is None:
        await app.conversation.note("/inductor needs a session with a problem and a candidate directory; from a "
                                    "shell: kernelpilot init --from-inductor PROBLEM", "warning")
        return
    await app.conversation.note("Recording torch.compile's kernels on the GPU …", "system")

    def write() -> object:
        return write_inductor_candidate(problem, s.watch_dir, lambda p: p)

    try:
        conversion = await asyncio.to_thread(write)
    except Exception as err:  # noqa: BLE001 - a ConversionError or a broken GPU: say it, keep the session
        await app.conversation.note(f"/inductor: {err}", "warning")
        return
    await app.conversation.note(f"Wrote torch.compile's kernels ({', '.join(conversion.kernels)}) as the candidate; "
                                "it is evaluated like any edit.", "system")


async def _revert(app: KernelpilotApp, arg: str) -> None:
    s = app.startup
    if _session_has(app, "revert"):
        assert app.runner is not None
        await app.runner.call("revert", arg)
    elif s is not None and s.workspace is not None:
        await asyncio.to_thread(s.workspace.restore, arg)
        if not s.manual:
            await app.send_to_agent(f"The engineer reverted the candidate files to candidate {arg}.", echo=False)
    else:
        await app.conversation.note("This session has no workspace to revert in.", "warning")
        return
    if app.watcher is not None:
        app.watcher.rebaseline()
    await app.conversation.note(f"Candidate files reverted to {arg}.", "system")


async def _help(app: KernelpilotApp, arg: str) -> None:
    keymap = app._keymap
    lines: list[tuple[str, str]] = []
    for owner, bindings in (("", app.BINDINGS), ("review: ", ReviewScreen.BINDINGS)):
        for b in bindings:
            if isinstance(b, Binding):
                key = keymap.get(b.id, b.key) if b.id else b.key
                lines.append((key.replace(",", ", "), owner + b.description))
    lines.append(("ctrl+p", "command palette"))
    await app.conversation.note_markdown(help_text(lines), "system")


async def _problem(app: KernelpilotApp, arg: str) -> None:
    if not await app.show_problem_card():
        await app.conversation.note("No problem card yet: the session is still starting (or it has no problem file).",
                                    "warning")


async def _quit(app: KernelpilotApp, arg: str) -> None:
    await app.action_quit()


HANDLERS: dict[str, Handler] = {
    "model": _model, "budget": _budget, "cost": _cost, "skills": _skills, "skill": _skill,
    "profile": _profile, "inductor": _inductor, "revert": _revert, "help": _help, "quit": _quit, "problem": _problem,
}
