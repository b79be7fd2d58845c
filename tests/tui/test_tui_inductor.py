"""/inductor in the TUI: with an agent it asks for the inductor tool; without a problem it says how else."""

from __future__ import annotations

from test_tui_commands import make_app, type_command
from tui_support import conversation_text, wait_for

from kernelpilot.tui.commands import BY_NAME


async def test_inductor_asks_the_agent_for_torch_compiles_kernels() -> None:
    assert BY_NAME["inductor"].usage == "/inductor"
    app, session = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        await type_command(pilot, "/inductor")
        await wait_for(pilot, lambda: bool(session.sent), what="inductor request")
        assert "inductor tool" in session.sent[0] and "torch.compile" in session.sent[0]


async def test_inductor_without_a_problem_points_at_the_init_command() -> None:
    app, session = make_app(model="")
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_for(pilot, lambda: app.startup is not None)
        await type_command(pilot, "/inductor")
        await wait_for(pilot, lambda: "kernelpilot init --from-inductor" in conversation_text(app), what="hint")
        assert session.sent == []
