"""Where a GPU slot's seconds went, and how many built jobs waited for a slot over the run (the throughput
table of the suite report).

A verdict that held a slot carries its phases: the worker's own (``problem``, ``prepare``, ``compile_baseline``,
``import``, ``verify``, ``audit``, ``timing``, ...), ``worker_busy`` (the worker's clock over the request and
its preparation), ``suite_slot`` (how long the slot held the job) and ``suite_queue`` (how long the built job
waited for a slot). Stored just after the slot let it go (``created_at``), a job was taken at
``created_at - suite_slot`` and ready at that less ``suite_queue``.
"""

from __future__ import annotations

from kernelpilot.suite.store import Row

WORKER_PHASES = ("problem", "prepare", "compile_baseline", "compile_check", "import", "build_warmup",
                 "build_in_worker", "verify", "audit", "kernelbench", "timing", "gpu_wait")
OTHER = "worker, other"  # the worker's busy time no named phase covers (a request's reading and writing)
IDLE = "slot held, worker idle"  # the client's side: sending, the SASS check, storing; or a hung worker's kill
BUCKETS = 12  # queue depth is shown over this many equal slices of the run


def held_slot(row: Row) -> tuple[dict[str, float], float, float] | None:
    """(phases, busy, held) of a verdict that held a slot, else None. A request killed by the watchdog has no
    window, but its time until the kill (``worker_busy``) counts."""
    verdict = row.verdict or {}
    phases = verdict.get("phases") or {}
    window = verdict.get("worker_window") or []
    if row.gpu is None or (len(window) != 2 and "suite_slot" not in phases):
        return None
    busy = float(phases.get("worker_busy", window[1] - window[0] if len(window) == 2 else 0.0))
    return phases, busy, float(phases.get("suite_slot", busy))


def slot_seconds(rows: list[Row]) -> dict[str, dict[str, float]]:
    """Per GPU, seconds by phase over the jobs its slot held (named phases, then the worker's other time, then
    the time the slot was held with the worker idle); they add up to the seconds held."""
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        found = held_slot(row)
        if found is None:
            continue
        phases, busy, held = found
        use = out.setdefault(str(row.gpu), {})
        named = 0.0
        for name in WORKER_PHASES:
            seconds = float(phases.get(name, 0.0))
            if seconds:
                use[name] = use.get(name, 0.0) + seconds
                named += seconds
        use[OTHER] = use.get(OTHER, 0.0) + max(0.0, busy - named)
        use[IDLE] = use.get(IDLE, 0.0) + max(0.0, held - max(busy, named))
    return out


def queue_depth(rows: list[Row], buckets: int = BUCKETS) -> list[dict[str, float]]:
    """Built jobs waiting for a GPU slot over the run, in ``buckets`` equal slices from the first job ready to
    the last one taken: per slice its start (seconds from the first), the time-averaged and the largest depth."""
    spans: list[tuple[float, float]] = []
    for row in rows:
        phases = (row.verdict or {}).get("phases") or {}
        if row.created_at is None or "suite_slot" not in phases or "suite_queue" not in phases:
            continue
        taken = float(row.created_at) - float(phases["suite_slot"])
        spans.append((taken - float(phases["suite_queue"]), taken))
    if not spans:
        return []
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    width = (end - start) / buckets if end > start else 1.0
    out = []
    for i in range(buckets):
        lo, hi = start + i * width, start + (i + 1) * width
        mean = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in spans) / width
        # the largest depth in the slice: at one of its ready times (or its start)
        points = [lo] + [s for s, _ in spans if lo <= s < hi]
        most = max(sum(1 for s, e in spans if s <= t < e) for t in points)
        out.append({"from_s": round(lo - start, 3), "mean": round(mean, 3), "max": float(most)})
    return out


def slot_lines(use: dict[str, dict[str, float]], depth: list[dict[str, float]]) -> list[str]:
    """The report's Markdown for both."""
    out: list[str] = []
    for gpu, phases in sorted(use.items()):
        held = sum(phases.values()) or 1.0
        out += [f"Where {gpu}'s slot time went ({held:.1f} s held):", "", "| phase | s | share |", "|---|---|---|"]
        for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]):
            out.append(f"| {name} | {seconds:.1f} | {100 * seconds / held:.1f}% |")
        out.append("")
    if depth:
        out += ["Built jobs waiting for a GPU slot (queue depth), over equal slices of the run:", "",
                "| from s | mean | max |", "|---|---|---|"]
        out += [f"| {d['from_s']:.0f} | {d['mean']:.2f} | {d['max']:.0f} |" for d in depth]
        out.append("")
    return out
