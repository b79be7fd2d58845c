"""The first screen without tmux: the real app (real launcher, engine and GPU) run headless by Textual
at a given size until the problem card has its baselines; writes the card as text and the screen as
SVG. Used by first_screen_gpu.sh when the machine has no tmux.

    python benchmarks/first_screen_headless.py PROBLEM WIDTH HEIGHT OUTDIR [TIMEOUT_S]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from functools import partial
from pathlib import Path


async def main(problem: str, width: int, height: int, out: Path, timeout: float) -> int:
    from kernelpilot.tui.launch import _config, app_for, build_startup
    from kernelpilot.tui.problem_card import ProblemCard

    args = argparse.Namespace(path=problem, model=None, replay=None, resume=None)
    _config(args)
    app = app_for(args, partial(build_startup, args))  # the launcher's app: card drawn before the session
    t0 = time.monotonic()
    filled = None
    async with app.run_test(size=(width, height)) as pilot:
        while time.monotonic() - t0 < timeout:
            f = app.card_facts
            done = f is not None and (f.baselines is not None or bool(f.baselines_error) or f.gpu is False)
            if f is not None and f.info is not None and done:
                filled = time.monotonic() - t0
                break
            await pilot.pause(0.5)
        await pilot.pause(0.5)
        tag = f"{width}x{height}"
        cards = list(app.query(ProblemCard))
        (out / f"card-{tag}.txt").write_text(cards[0].plain + "\n" if cards else "no card\n")
        (out / f"screen-{tag}.svg").write_text(app.export_screenshot())
        await pilot.press("ctrl+q")
    print(f"{tag}: baselines {'after %.1f s' % filled if filled is not None else 'NOT filled within %.0f s' % timeout}")
    return 0 if filled is not None else 1


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(asyncio.run(main(a[0], int(a[1]), int(a[2]), Path(a[3]), float(a[4]) if len(a) > 4 else 90.0)))
