"""The first screen, from process start: the real launcher and app (manual mode) driven by Textual's Pilot.

    python benchmarks/first_screen.py [--example softmax] [--seconds 6] [--timeout 120] [--out OUT.json]
                                      [--seed-baselines tests/data/baselines/softmax_h200.json]   (CPU only)

Each launch is a fresh process (``--child``), timed from just before it was started. The first launch runs
with empty caches (a temporary ``XDG_CACHE_HOME``: no problem facts, no baselines), the second with what the
first left there (on a GPU the first waits for this session's baselines, so the second finds them cached).
Printed per launch, in seconds from process start:

- ``shell_s``: the app's first screen mounted (Pilot's ``run_test`` has entered);
- ``card_s``: the problem card in the conversation (its title, before its facts);
- ``facts_s``: the card with the problem's shapes, bytes and FLOPs;
- ``cached_baselines_s``: the machine's cached eager and torch.compile times on the card (a GPU and a warm cache);
- ``baselines_s``: this session's baselines on the card (GPU), or the card saying none can be timed (no GPU);
- ``baselines_parts``: the worker's start (step by step) and the baselines' measurement, compile and timing;
- ``key_ms``: while the session starts (``--seconds``), a key sent every 100 ms as the terminal sends it, until
  it is in the input box (drawn at the next refresh): median and max; ``stall_ms``: the longest the UI's event
  loop did not run a 10 ms timer in that time.

The example is copied into a git repository of its own; worktrees go to a temporary data directory.
"""

from __future__ import annotations

import time

STARTED = time.time()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def since(t0: float, at: float | None) -> float | None:
    return round(at - t0, 3) if at is not None else None


async def child(problem: Path, t0: float, seconds: float, timeout: float) -> dict[str, Any]:
    from kernelpilot import cli

    args = cli.build_parser().parse_args(["pair", str(problem)])
    cli.prepare(args)  # as `kernelpilot PROBLEM` does before it imports the UI (it starts the cached lookup)

    from textual import events
    from textual.widgets import Input

    from kernelpilot.tui.app import KernelpilotApp
    from kernelpilot.tui.launch import app_for, build_startup
    from kernelpilot.tui.problem_card import ProblemCard

    app: KernelpilotApp = app_for(args, partial(build_startup, args), None)
    out: dict[str, Any] = {"python_imports_s": since(t0, time.time())}
    seen: dict[str, float] = {}
    gaps: list[float] = []

    def watch() -> None:
        now, f = time.time(), app.card_facts
        checks = {"card_s": bool(list(app.query(ProblemCard))),
                  "facts_s": f is not None and (f.info is not None or bool(f.info_error)),
                  "cached_baselines_s": f is not None and f.cached is not None,
                  "baselines_s": f is not None and (f.baselines is not None or bool(f.baselines_error)
                                                    or f.gpu is False),
                  "startup_s": app.startup is not None}
        for name, ok in checks.items():
            if ok and name not in seen:
                seen[name] = now
        gaps.append(now)

    async with app.run_test(size=(120, 40)) as pilot:
        out["shell_s"] = since(t0, time.time())
        app.set_interval(0.01, watch)
        prompt = app.query_one("#prompt", Input)
        keys: list[float] = []
        start = time.time()
        while time.time() - start < seconds:
            before, pressed = prompt.value, time.time()
            key = events.Key("x", "x")  # as the terminal's driver sends it (Pilot's press also waits for idle)
            key.set_sender(app)
            app._driver.send_message(key)  # type: ignore[union-attr]
            while prompt.value == before and time.time() - pressed < 5:
                await asyncio.sleep(0.001)
            keys.append(time.time() - pressed)
            await asyncio.sleep(0.1)
        out["key_ms"] = {"n": len(keys), "median": round(1000 * statistics.median(keys), 1),
                         "max": round(1000 * max(keys), 1)}
        stamps = [g for g in gaps if g <= start + seconds]
        out["stall_ms"] = round(1000 * max((b - a for a, b in zip(stamps, stamps[1:])), default=0.0), 1)
        prompt.value = ""
        while not {"baselines_s", "facts_s"} <= set(seen) and time.time() - start < timeout:
            await pilot.pause(0.05)
        out["baselines_parts"] = baseline_parts(app, t0)  # before quitting: closing the session stops its worker client
        await pilot.press("ctrl+q")
    for name in ("card_s", "facts_s", "cached_baselines_s", "baselines_s", "startup_s"):
        out[name] = since(t0, seen.get(name))
    return out


def baseline_parts(app: Any, t0: float | None = None) -> dict[str, Any]:
    """Where the session's baselines went: when the worker was launched (seconds after ``t0``, the process's start,
    by the wall clock), its start step by step, then the measurement's own seconds, torch.compile's compile and the
    exclusive timing, and the measurement step by step (each as the engine reports it)."""
    evaluator = getattr(app.startup, "evaluator", None) if app.startup is not None else None
    b = app.card_facts.baselines if app.card_facts is not None else None
    start = float(getattr(evaluator, "last_worker_start_s", 0.0) or 0.0)
    steps = dict(getattr(evaluator, "last_worker_start_steps", {}) or {})
    client = getattr(evaluator, "_client", None)  # the baselines' request records no start of its own (2026-12-07)
    if not start and client is not None and getattr(client, "ready_at", 0.0) > getattr(client, "launched_at", 0.0):
        start, steps = client.ready_at - client.launched_at, dict(getattr(client, "start_steps", {}) or {})
    launched = float(getattr(client, "launched_at", 0.0) or 0.0) if client is not None else 0.0
    if launched and t0 is not None:  # the client's monotonic clock on the wall clock's scale
        launched = round(launched + time.time() - time.monotonic() - t0, 3)
    else:
        launched = None
    return {"worker_launched_s": launched, "worker_start_s": round(start, 3), "worker_start_steps": steps,
            "measure_s": getattr(b, "seconds", None), "compile_s": getattr(b, "compile_s", None),
            "exclusive_s": getattr(b, "exclusive_s", None), "measure_steps": getattr(b, "steps", None)}


def launch(problem: Path, env: dict[str, str], a: argparse.Namespace) -> dict[str, Any]:
    env = {**env, "KP_BENCH_T0": repr(time.time())}
    cmd = [sys.executable, __file__, "--child", str(problem), "--seconds", str(a.seconds), "--timeout",
           str(a.timeout)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout + 120)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        return {"error": (done.stderr or done.stdout)[-2000:]}
    return json.loads(lines[-1])


def seed_baselines(problem: Path, fixture: Path, env: dict[str, str]) -> None:
    """Without a GPU nothing measures baselines: store a fixture's as this machine's, for the warm launch."""
    from kernelpilot.config import load_config
    from kernelpilot.evaluation.baselines.identity import current_identity
    from kernelpilot.evaluation.baselines.machine_cache import BaselineTable, machine_key
    from kernelpilot.evaluation.settings import EvalSettings

    settings = EvalSettings.from_config(load_config(problem.parent, overrides={"problem": str(problem)}))
    where = Path(env["XDG_CACHE_HOME"]) / "kernelpilot" / "baselines.sqlite"
    where.parent.mkdir(parents=True, exist_ok=True)
    table = BaselineTable(where, wal=False)
    table.put(machine_key(problem, settings, current_identity(None)), str(problem), json.loads(fixture.read_text()))
    table.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--example", default="softmax")
    p.add_argument("--seconds", type=float, default=6.0, help="how long keys are typed while the session starts")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--out", type=Path)
    p.add_argument("--seed-baselines", type=Path, metavar="JSON",
                   help="before the warm launch, store these Baselines as this machine's (a CPU machine measures none; "
                        "e.g. tests/data/baselines/softmax_h200.json)")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        t0 = float(os.environ.get("KP_BENCH_T0") or STARTED)
        print(json.dumps(asyncio.run(child(a.child, t0, a.seconds, a.timeout))), flush=True)
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from edit_loop import copy_example

    work = Path(tempfile.mkdtemp(prefix="kp-first-screen-"))
    example = copy_example(a.example, work, small=False)
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "KERNELPILOT_DATA_DIR": str(work / "data"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("KERNELPILOT_FACTS_CACHE", None)
    env.pop("KERNELPILOT_BASELINES_CACHE", None)
    results = {}
    for name in ("cold", "warm"):
        if name == "warm" and a.seed_baselines:
            os.environ["XDG_CACHE_HOME"] = env["XDG_CACHE_HOME"]
            seed_baselines((example / "problem.py").resolve(), a.seed_baselines.resolve(), env)
        results[name] = launch(example / "problem.py", env, a)
        print(f"{name}: {json.dumps(results[name])}", flush=True)
    if a.out:
        a.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
