"""The wire protocol between the caller and the evaluation worker.

Frames are a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. They travel over two
dedicated pipes (one per direction), never over stdout/stderr: candidate code may print anything, and
the worker's fd 1 and 2 go to a log file whose tail ends up in the verdict when something breaks.

Requests are ``{"op": ..., ...}``; responses are ``{"ok": bool, ...}``. Ops:

- ``ready`` (sent once by the worker, unprompted): environment and confinement facts, when it was up and what its
  start's seconds went to (``main_at``, ``start_steps``: worker/start_steps.py; read by ``start_steps`` below).
- ``ping`` -> ``{"ok": true, "pid": ...}``.
- ``prepare`` (load the problem, compile the baseline, while the candidate builds) ->
  ``{"op": "prepared", "ok": bool}``, which the caller skips.
- ``evaluate`` -> ``{"ok": true, "verdict": {...partial Verdict dict...}, "exit": bool, "window": [start, end],
  "busy_s": ..., "prepare_s": ...}``; ``exit`` means the worker is about to leave (poisoned CUDA context,
  patched functions, stray threads); ``busy_s`` is the worker's time on this request and the ``prepare``
  before it, ``prepare_s`` (only after a prepare) the part of it the prepare took.
- ``baselines`` -> ``{"ok": bool, "baselines": {...}}`` (eager and torch.compile timed, baselines.py).
- ``shutdown`` -> the worker exits without answering.

While it works on a request the worker also sends ``{"op": "watch", "phase", "call", "allow_s"}`` frames:
the deadline of what it does next (the hang watchdog, watchdog.py). A benchmark request with ``"stage_test":
true`` may also get one ``{"op": "tested", "verdict": {...}, "window": [start, end]}`` frame before its answer:
the verdict a test request would have given (verified and audited, not yet timed), sent when the candidate is
ok and about to be timed, so the caller can show it while the timing runs.

This module imports nothing heavy and is used on both sides.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

MAX_FRAME = 256 * 1024 * 1024
WATCH = "watch"  # a deadline frame from the worker
PREPARED = "prepared"  # the answer to "prepare"
TESTED = "tested"  # a benchmark's test verdict, before its timing (requests with "stage_test")
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The other side closed the pipe or sent something that is not a frame."""


class FrameTimeout(ProtocolError):
    """No complete frame arrived within the time allowed."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, allow_nan=True, default=str).encode("utf-8")
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME}-byte limit")
    return _HEADER.pack(len(body)) + body


def send(fd: int, message: dict[str, Any]) -> None:
    data = memoryview(encode(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise FrameTimeout("timed out waiting for the worker")
            ready, _, _ = select.select([fd], [], [], min(wait, 1.0))
            if not ready:
                continue
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ProtocolError("pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, timeout: float | None = None) -> dict[str, Any]:
    """Read one frame; ``timeout`` seconds (None waits forever)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (length,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if length > MAX_FRAME:
        raise ProtocolError(f"frame length {length} exceeds the limit")
    body = _read_exact(fd, length, deadline)
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"bad frame: {exc}") from exc
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message


def start_steps(ready: dict[str, Any], launched_at: float, ready_at: float) -> dict[str, float]:
    """The seconds of a worker's start, step by step: from its launch to its ``main()`` (the interpreter, the
    confinement wrapper, the harness's imports), then the steps the worker timed itself (torch's import, CUDA's
    start, the integrity baseline, the timer, the ceilings, the confinement); {} from a worker that timed none."""
    steps = ready.get("start_steps")
    if not isinstance(steps, dict):
        return {}
    out: dict[str, float] = {}
    main_at = ready.get("main_at")
    if isinstance(main_at, (int, float)) and launched_at <= main_at <= ready_at:
        out["launch_to_main"] = round(float(main_at) - launched_at, 3)
    out.update({str(k): float(v) for k, v in steps.items() if isinstance(v, (int, float))})
    return out
