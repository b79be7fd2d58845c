"""One pairing session in the real app, driven by Textual's Pilot: edits saved, the verdicts drawn, timed.

    python benchmarks/pair_session.py EXAMPLE_DIR OUT.json [--edits kernel,header,model,...] [--timeout S]

EXAMPLE_DIR is a git repository holding problem.py, kernelpilot.toml and candidate/ (edit_loop.copy_example
makes one). The real launcher (``build_startup``: config, worktree, Evaluator with its standby builder) runs
the real app headless at 120x40, in manual mode. Recorded, in seconds: ``card_s`` (from this process's
start to the card with the problem's shapes, bytes and FLOPs), ``baselines_s`` (from process start to this
session's eager and torch.compile on the card), ``cached_s`` (the machine's cached baselines, when shown at the
card's time), and for each edit (each a change
of compiled code never compiled before: a ``#pragma unroll`` count, else a ``__device__`` constant, plus a
unique comment): ``drawn_s`` (from the file's write to the candidate's row drawn with its first verdict),
``benchmark_drawn_s`` (to the row's benchmark verdict, when the save is benchmarked after its test),
``engine_s`` (the Evaluator's own wall time of that verdict), the verdict's status, mode, phases and build
path. Edits start once this session's baselines are on the card (they hold the evaluation worker); with
``--first-save`` the first edit is saved as soon as the session exists (its worktree made, the baselines still
being measured): ``first_verdict_s`` (its write to its verdict drawn) and ``first_verdict_from_launch_s`` (from this
process's start), the issue's "first verdict after launch" when the caches are empty.
"""

from __future__ import annotations

import time

STARTED = time.time()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

_PRAGMA = re.compile(r"^(\s*)#pragma unroll(\s+\d+)?\s*$")


# "break": an edit that makes the kernel's result wrong, per example (its verdict must be incorrect: the edited
# kernel is the one that ran)
BREAKS = {"softmax": ("* inv_sum;", "* inv_sum * 2.f;"), "rmsnorm": ("* inv_rms", "* inv_rms * 2.f")}


def edited(text: str, kind: str, n: int, example: str = "") -> str:
    """``text`` with compiled code changed (edit ``n``), never the same twice in a session."""
    tag = f"{n}-{os.urandom(4).hex()}"
    if kind == "break":
        old, new = next((v for k, v in BREAKS.items() if example.startswith(k)), ("", ""))
        return text.replace(old, new, 1) + f"\n// pair_session.py {tag}\n" if old and old in text else text
    if kind in ("model", "triton"):
        return text + f"\n_KP_EDIT = '{tag}'  # pair_session.py\n"
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if _PRAGMA.match(line)), None)
    if at is not None:
        lines[at] = f"{_PRAGMA.match(lines[at])[1]}#pragma unroll {(1, 2, 4)[n % 3]}"  # type: ignore[index]
        return "\n".join(lines) + f"\n// pair_session.py {tag}\n"
    return text + f"\nstatic __device__ const int kp_edit_marker_{n} = {n};  // pair_session.py {tag}\n"


def target(watch: Path, kind: str) -> Path | None:
    if kind in ("model", "triton"):
        return watch / "model_new.py" if (watch / "model_new.py").is_file() else None
    pattern = {"kernel": "*.cu", "break": "*.cu", "header": "*.cuh"}[kind]
    found = sorted(watch.glob(pattern)) or (sorted(watch.glob("*.h")) if kind == "header" else [])
    return found[0] if found else None


async def session(example: Path, kinds: list[str], timeout: float, wait_benchmark: bool,
                  first_save: bool = False) -> dict[str, Any]:
    from kernelpilot.tui.launch import _config, app_for, build_startup
    from kernelpilot.tui.widgets.candidates import CandidatesPanel

    from kernelpilot.evaluation.sandbox import bytecode

    bytecode.use_here()  # as `kernelpilot` does at launch (cli.prepare): its bytecode read, or a writer started
    bytecode.write_soon()
    args = argparse.Namespace(path=str(example / "problem.py"), model=None, replay=None, resume=None)
    _config(args)
    app = app_for(args, partial(build_startup, args))  # the launcher's app: card drawn before the session
    out: dict[str, Any] = {"example": example.name, "edits": []}

    async def until(predicate: Any, limit: float) -> float | None:
        start = time.time()
        while time.time() - start < limit:
            if predicate():
                return time.time()
            await pilot.pause(0.005)
        return None

    async with app.run_test(size=(120, 40)) as pilot:
        def card_ready() -> bool:
            facts = app.card_facts
            return facts is not None and (facts.info is not None or bool(facts.info_error))

        at = await until(card_ready, timeout)
        out["card_s"] = round(at - STARTED, 3) if at else None
        # the session exists and its watcher has read the candidate's files (a save before that is its starting point)
        at = await until(lambda: app.startup is not None and app.startup.watch_dir is not None
                         and getattr(app, "watcher", None) is not None, timeout)
        facts = app.card_facts
        if facts is not None and getattr(facts, "cached", None) is not None:
            out["cached_s"] = out["card_s"]
        def baselines_done() -> bool:
            f = app.card_facts
            return f is not None and (f.baselines is not None or bool(f.baselines_error) or f.gpu is False)

        panel = app.query_one(CandidatesPanel)
        watch = app.startup.watch_dir if app.startup else None

        async def edit_once(n: int, kind: str) -> dict[str, Any]:
            path = target(watch, kind) if watch else None
            if path is None:
                return {"kind": kind, "skipped": "no such file"}
            before = set(panel.records)
            text = path.read_text()
            written = time.time()
            path.write_text(edited(text, kind, n, example.name))

            def new_record() -> Any:
                fresh = [r for k, r in panel.records.items() if k not in before]
                return fresh[-1] if fresh and fresh[-1].verdict.status not in ("", "running") else None

            drawn = await until(lambda: new_record() is not None, timeout)
            rec = new_record()
            row: dict[str, Any] = {"kind": kind, "file": path.name, "written_s": round(written - STARTED, 3),
                                   "drawn_s": round(drawn - written, 3) if drawn else None}
            if rec is not None:
                v = rec.verdict
                row.update(status=v.status, mode=v.mode, engine_s=v.seconds, phases=dict(v.phases),
                           build=(v.build.command[:100] if v.build else ""),
                           sass_check=(v.build.sass_check if v.build else ""))
                if wait_benchmark and app.startup is not None and app.startup.gpu and v.status == "ok" \
                        and v.mode != "benchmark":
                    key = rec.candidate_id
                    done = await until(lambda: panel.records[key].verdict.mode == "benchmark", timeout)
                    b = panel.records[key].verdict
                    row.update(benchmark_drawn_s=round(done - written, 3) if done else None,
                               benchmark_status=b.status, benchmark_engine_s=b.seconds,
                               benchmark_phases=dict(b.phases), sass_check=(b.build.sass_check if b.build else ""))
            print(f"  {example.name} {kind}: drawn {row.get('drawn_s')} s ({row.get('status')}, engine "
                  f"{row.get('engine_s')} s) benchmark {row.get('benchmark_drawn_s')} s", flush=True)
            return row

        if first_save and kinds:  # saved as soon as the session exists, the baselines still being measured
            out["baselines_done_at_first_save"] = baselines_done()
            row = await edit_once(1, kinds[0])
            out["edits"].append(row)
            out["first_verdict_s"] = row.get("drawn_s")
            if row.get("drawn_s") is not None:
                out["first_verdict_from_launch_s"] = round(row["written_s"] + row["drawn_s"], 3)
        # the session's baselines hold the evaluation worker: the other edits are timed once they are on the card
        at = await until(baselines_done, timeout)
        out["baselines_s"] = round(at - STARTED, 3) if at else None
        for n, kind in enumerate(kinds, 1):
            if first_save and n == 1:
                continue
            out["edits"].append(await edit_once(n, kind))
        await pilot.press("ctrl+q")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("example", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--edits", default="kernel,kernel,kernel")
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--no-benchmark", action="store_true", help="do not wait for a save's benchmark verdict")
    p.add_argument("--first-save", action="store_true",
                   help="save the first edit as soon as the session exists, the baselines not yet measured")
    a = p.parse_args()
    result = asyncio.run(session(a.example.resolve(), [k for k in a.edits.split(",") if k], a.timeout,
                                 not a.no_benchmark, a.first_save))
    a.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
