"""c0 for many problems at once: record torch.compile on the GPU in parallel, convert on every core.

Problems are a problem file, a folder of them, or a KernelBench checkout (``level1/`` ``level2/``
``level3/``, also under ``KernelBench/``), found as the suite finds them (kernelpilot.suite.discovery);
each has a key (``level1/23_Softmax``, or the file's stem outside a level).

- ``record_all`` (recorder.py): one fresh process per problem, several at once under a GPU memory
  budget and a per-problem timeout; ``DIR/<key>.json`` is written as each finishes, so a killed call
  keeps what finished, and a call run again records only what is left.
- ``convert_all``: each recording into ``OUT/<key>/`` (the suite's ``--solutions`` layout), in a
  process pool, one problem per task: a failure is that problem's outcome and never stops the others,
  a worker that dies costs only the problem it held. Writes ``OUT/c0-index.json``: every problem with
  its outcome (``converted``, ``eager``, ``failed``, ``not_recorded``) and the reason.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable

from kernelpilot.inductor.c0 import candidate_from_recording, recording_graphs, write_candidate
from kernelpilot.inductor.helpers import ConversionError
from kernelpilot.inductor.recorder import Item, record_all, recording_status, write_atomic
from kernelpilot.inductor.smoke import check_candidate_dir
from kernelpilot.suite.discovery import discover_problems

INDEX = "c0-index.json"
__all__ = ["INDEX", "Item", "convert_all", "convert_one", "discover", "record_all", "recording_status"]


def discover(paths: list[Path], levels: list[int] | None = None) -> list[Item]:
    """The problems under ``paths`` (files, folders, KernelBench checkouts), with their keys."""
    return [Item(ref.key, ref.path) for ref in discover_problems([Path(p) for p in paths], levels)]


def convert_one(key: str, problem: str, recording: str, out: str, helpers: str | None) -> dict[str, Any]:
    """One problem's c0 into ``out/<key>/``; never raises: the outcome says what happened."""
    t0 = time.monotonic()
    row: dict[str, Any] = {"problem": key, "candidate": str(Path(out) / key)}
    try:
        data = json.loads(Path(recording).read_text(encoding="utf-8"))
        if recording_status(data) == "failed":
            return {**row, "candidate": None, "outcome": "failed",
                    "reason": "torch.compile failed: " + str(data.get("error")).splitlines()[0][:400]}
        conversion = candidate_from_recording(problem, data, helpers)
        target = Path(out) / key
        if target.exists():
            for old in target.iterdir():
                if old.is_file():
                    old.unlink()
        write_candidate(target, conversion)
        reason = {"graph": "one graph, the whole forward", "eager": "no graph: the problem's forward, eager",
                  "traced": "graphs and eager code, in dynamo's order"}[conversion.shape]
        facts = {"shape": conversion.shape, "kernels": len(conversion.kernels), "libraries": conversion.libraries,
                 "configs": conversion.configs, "graphs": len(recording_graphs(data))}
        try:  # imports, constructs on the meta device, every name it will look up resolves
            check_candidate_dir(target, problem)
        except ConversionError as exc:
            return {**row, **facts, "outcome": "failed", "reason": f"written, but it would not run: {exc}"[:600],
                    "seconds": round(time.monotonic() - t0, 2)}
        return {**row, **facts, "outcome": "eager" if conversion.shape == "eager" else "converted",
                "reason": reason, "seconds": round(time.monotonic() - t0, 2)}
    except Exception as exc:  # noqa: BLE001 - one problem's failure is its outcome
        return {**row, "candidate": None, "outcome": "failed", "reason": f"{type(exc).__name__}: {exc}"[:600],
                "seconds": round(time.monotonic() - t0, 2)}


def convert_all(items: list[Item], recordings: Path, out: Path, workers: int | None = None,
                helpers: str | None = None, report: Callable[[dict[str, Any]], None] | None = None,
                timeout: float = 300.0) -> list[dict[str, Any]]:
    """Convert every item's recording (``recordings/<key>.json``) into ``out`` (see the module docstring).

    ``timeout``: a pool in which no conversion finishes for that long is stopped, and the problems it
    still held are converted one at a time, each within ``timeout`` seconds or failed for it."""
    out.mkdir(parents=True, exist_ok=True)
    show = report or _print
    rows: dict[str, dict[str, Any]] = {}
    todo = []
    for item in items:
        path = recordings / f"{item.key}.json"
        if path.is_file():
            todo.append((item, path))
        else:
            rows[item.key] = {"problem": item.key, "candidate": None, "outcome": "not_recorded",
                              "reason": f"no recording {path}: record it on a GPU (without --recordings)"}
    for row in rows.values():
        show(row)

    def done(row: dict[str, Any]) -> None:
        rows[row["problem"]] = row
        show(row)
        write_atomic(out / INDEX, json.dumps([rows[i.key] for i in items if i.key in rows], indent=1))

    jobs = workers or os.cpu_count() or 1
    # the long conversions first (level 3: networks, RNNs traced or run on the CPU), so they are not the tail
    left = sorted(todo, key=lambda t: -_level(t[0].key))
    while left:  # a worker that dies or hangs breaks its pool: the problems it held are retried alone
        left = _pool_round(left, out, jobs, helpers, done, timeout)
        suspects, left = left[:jobs + 1], left[jobs + 1:]  # the ones running when it broke (and one queued)
        for item, path in suspects:
            if _pool_round([(item, path)], out, 1, helpers, done, timeout):
                done({"problem": item.key, "candidate": None, "outcome": "failed",
                      "reason": "the conversion process died or did not finish within "
                                f"{timeout:g} s (a crash or a hang in torch or in the problem's code)"})
    ordered = [rows[i.key] for i in items]
    write_atomic(out / INDEX, json.dumps(ordered, indent=1))
    return ordered


def _pool_round(todo: list[tuple[Item, Path]], out: Path, workers: int, helpers: str | None,
                done: Callable[[dict[str, Any]], None], timeout: float) -> list[tuple[Item, Path]]:
    """Convert ``todo`` in one pool; returns what a dead or hung worker left unconverted."""
    import multiprocessing

    if not todo:
        return []
    context = multiprocessing.get_context("spawn")  # torch's threads make fork unsafe
    pool = ProcessPoolExecutor(max_workers=max(1, min(workers, len(todo))), mp_context=context, max_tasks_per_child=20,
                               initializer=_one_thread)
    futures = {pool.submit(convert_one, item.key, str(item.path), str(path), str(out), helpers): (item, path)
               for item, path in todo}
    finished: set[str] = set()
    pending = set(futures)
    try:
        while pending:
            ready, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            if not ready:  # nothing finished for `timeout` seconds: a conversion hangs
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.kill()
                break
            for future in ready:
                item, _ = futures[future]
                try:
                    row = future.result()
                except BrokenProcessPool:
                    continue
                finished.add(item.key)
                done(row)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [(item, path) for item, path in todo if item.key not in finished]


def _one_thread() -> None:
    """A conversion worker computes with one thread: one worker per core already fills the machine."""
    import torch

    torch.set_num_threads(1)


def _level(key: str) -> int:
    head = key.split("/", 1)[0]
    return int(head[5:]) if head.startswith("level") and head[5:].isdigit() else 0


def _print(row: dict[str, Any]) -> None:
    extra = f" ({row['shape']}, {row.get('kernels', 0)} kernels)" if row.get("shape") else ""
    print(f"{row['problem']}: {row['outcome']}{extra}" + ("" if row["outcome"] in ("converted", "eager")
                                                        else f": {row['reason']}"), flush=True)
