"""One launch of the pairing UI's first screen, headless (edit_loop.py runs it in a fresh process).

    python benchmarks/edit_loop_screen.py PROBLEM OUT.json [TIMEOUT_S] [--until cached|baselines]

The real launcher (``build_startup``: config, worktree, Evaluator with its standby builder) and the real
app, run by Textual headless at 120x40. Writes OUT.json with absolute ``time.time()`` stamps: ``started``
(this module's first line), ``card_mounted`` (the card is on screen), ``card`` (with the problem's shapes,
bytes and FLOPs), ``cached`` (eager and torch.compile from the machine's cache, when shown) and
``baselines`` (this session's, or the reason there are none); the caller subtracts its spawn time.
"""

from __future__ import annotations

import time

STARTED = time.time()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


async def first_screen(problem: str, timeout: float, until: str) -> dict[str, Any]:
    from kernelpilot.tui.launch import _config, app_for, build_startup
    from kernelpilot.tui.problem_card import ProblemCard

    args = argparse.Namespace(path=problem, model=None, replay=None, resume=None)
    _config(args)
    app = app_for(args, partial(build_startup, args))  # the launcher's app: card drawn before the session
    out: dict[str, Any] = {"started": STARTED}
    async with app.run_test(size=(120, 40)) as pilot:
        while time.time() - STARTED < timeout:
            facts = app.card_facts
            now = time.time()
            if "card_mounted" not in out and list(app.query(ProblemCard)):
                out["card_mounted"] = now
            if facts is not None:
                if "card" not in out and (facts.info is not None or facts.info_error):
                    out["card"] = now
                if "cached" not in out and getattr(facts, "cached", None) is not None:
                    out["cached"] = now
                    out["cached_date"] = facts.cached.date()
                if "baselines" not in out and (facts.baselines is not None or facts.baselines_error
                                               or facts.gpu is False):
                    out["baselines"] = now
                    out["baselines_error"] = facts.baselines_error or ("" if facts.gpu else "no GPU")
            if "card" in out and (("cached" in out and until == "cached") or "baselines" in out):
                break
            await pilot.pause(0.02)
        cards = list(app.query(ProblemCard))
        out["card_text"] = cards[0].plain if cards else ""
        await pilot.press("ctrl+q")
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("out")
    parser.add_argument("timeout", nargs="?", type=float, default=120.0)
    parser.add_argument("--until", choices=("cached", "baselines"), default="baselines")
    a = parser.parse_args()
    result = asyncio.run(first_screen(a.problem, a.timeout, a.until))
    Path(a.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
