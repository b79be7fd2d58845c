"""The suite's arithmetic, on stored rows: pass and faster rates, geomeans, KernelBench's fast_p, throughput.

Definitions (the report prints them):

- A problem's denominator is every planned problem: no candidate (``missing``), not started, build
  error, ... all count as failures, never as skipped.
- pass: status ``ok`` (built, correct on fresh inputs, no reject finding).
- faster than eager / torch.compile: pass and speedup > 1 (KernelBench's fast_1 threshold; the
  verdict's own tier asks 5% more).
- geomean: over the passing problems that have a speedup (CUDA Agent's reading), with ``fast_1``
  over all problems beside it, so a failure is never hidden.
- fast_p (KernelBench §2.4): the share of all problems that pass with speedup vs eager > p; fast_0
  is the pass rate. KernelBench scores sample 0 only: the ``sample0`` view; ``best_of_k`` takes each
  problem's best sample (pass first, then speedup vs torch.compile, then vs eager).
- not run yet: a planned problem with no verdict in the view (the run is incomplete: --levels,
  --problems or --limit left it for later, or the run stopped). It counts as a failure in every rate
  over all problems, as KernelBench counts a missing one, and is counted apart from the failures. A
  problem none of whose planned candidates is sample 0 (a published set whose sample 0 of that problem
  does not exist) is ``missing`` in the ``sample0`` view: a failure, as KernelBench scores it, not a job
  left for later.
- no torch.compile baseline: an ``ok`` benchmark verdict without a torch.compile time
  (``performance.compiled_missing`` says why, or there is no compiled time nor speedup vs compile). It
  counts as not faster in ``fast_1_vs_compile`` (all problems); ``fast_1_vs_compile_with_baseline`` is
  the same count over only the problems that are not known to lack a baseline.
- engine health (every stored verdict, every sample): retried (an earlier attempt's worker died),
  flaky (it then ran without dying), engine crashes (``Verdict.engine_crash``: a crash of ours, expected
  0), out of memory (``Verdict.memory``: what the harness held, what was asked for) and
  ``problem_too_large`` (the problem itself does not fit the GPU: about the problem, not the candidate;
  still a failure in the rates).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from kernelpilot.suite.slot_use import held_slot
from kernelpilot.suite.store import Row
from kernelpilot.verdict import Verdict

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
EXCESSIVE_SPEEDUP = 10.0  # KernelBench flags a speedup above this (a flag, not a verdict)
NOT_RUN = "not_run_yet"  # a planned problem without a verdict (in a view)


@dataclass
class Pick:
    """A problem's row in one view (None when no verdict was stored for it)."""

    problem: str
    level: int | None
    row: Row | None
    absent: bool = False  # no candidate of this view was planned (sample 0 of a folder that lacks it)

    @property
    def ok(self) -> bool:
        return self.row is not None and self.row.status == "ok"

    @property
    def status(self) -> str:
        if self.row is not None:
            return self.row.status
        return "missing" if self.absent else NOT_RUN


def no_compile_baseline(row: Row) -> bool:
    """An ``ok`` benchmark verdict with no torch.compile time to compare with (counted as not faster)."""
    v = row.verdict or {}
    if row.status != "ok" or v.get("mode") != "benchmark":
        return False
    perf = v.get("performance") or {}
    return bool(perf.get("compiled_missing")) or (not perf.get("compiled") and row.speedup_vs_compile is None)


def compile_fails_check(row: Row) -> str:
    """torch.compile's own failure of this problem's check, as the verdict records it ("" when it passed or was
    not checked)."""
    corr = (row.verdict or {}).get("correctness") or {}
    check = str(corr.get("compiled_check") or "")
    return check if check.startswith("failed") else ""


def _rank(row: Row) -> tuple[int, float, float]:
    return (row.status == "ok", row.speedup_vs_compile or 0.0, row.speedup_vs_eager or 0.0)


def views(planned: list[dict[str, Any]], rows: list[Row]) -> dict[str, list[Pick]]:
    """``sample0`` and ``best_of_k`` picks, one per planned problem (in plan order)."""
    problems: dict[str, int | None] = {}
    samples: dict[str, set[int]] = {}
    for job in planned:
        problems.setdefault(job["problem"], job["level"])
        samples.setdefault(job["problem"], set()).add(job.get("sample", 0))
    by_problem: dict[str, list[Row]] = {p: [] for p in problems}
    for r in rows:
        by_problem.setdefault(r.problem, []).append(r)
        problems.setdefault(r.problem, r.level)
    sample0 = [Pick(p, problems[p], next((r for r in by_problem[p] if r.sample == 0), None),
                    absent=p in samples and 0 not in samples[p]) for p in problems]
    best = [Pick(p, problems[p], max(by_problem[p], key=_rank) if by_problem[p] else None) for p in problems]
    return {"sample0": sample0, "best_of_k": best}


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def summarize(picks: list[Pick]) -> dict[str, Any]:
    """Every figure of one group of problems (a level, or all)."""
    n = len(picks)
    passed = [p for p in picks if p.ok]
    not_run = sum(1 for p in picks if p.row is None and not p.absent)
    no_baseline = sum(1 for p in picks if p.row is not None and no_compile_baseline(p.row))
    eager = [p.row.speedup_vs_eager for p in passed if p.row and p.row.speedup_vs_eager]
    compiled = [p.row.speedup_vs_compile for p in passed
                if p.row and p.row.speedup_vs_compile and not no_compile_baseline(p.row)]
    timed = any(eager) or any(compiled)
    fast_eager = sum(1 for s in eager if s > 1.0)
    fast_compile = sum(1 for s in compiled if s > 1.0)
    out: dict[str, Any] = {
        "problems": n,
        "passed": len(passed),
        "pass_rate": _rate(len(passed), n),
        "faster_than_eager": fast_eager if timed else None,
        "faster_than_eager_rate": _rate(fast_eager, n) if timed else None,
        "faster_than_compile": fast_compile if timed else None,
        "faster_than_compile_rate": _rate(fast_compile, n) if timed else None,
        "geomean_vs_eager": geomean(eager),
        "geomean_vs_compile": geomean(compiled),
        "timed": len(eager),
        "fast_p_vs_eager": {f"{p:g}": _rate(sum(1 for s in eager if s > p), n) if (timed or p == 0) else None
                            for p in FAST_P},
        "fast_1_vs_compile": _rate(fast_compile, n) if timed else None,
        "no_compile_baseline": no_baseline,
        "with_compile_baseline": n - no_baseline,
        "fast_1_vs_compile_with_baseline": _rate(fast_compile, n - no_baseline) if timed else None,
        "not_run_yet": not_run,
        "failed": n - len(passed) - not_run,
        "problem_too_large": sum(1 for p in picks if p.status == "problem_too_large"),
        # problems where torch.compile's own output fails the candidates' check (its "incorrect" c0 is torch.compile's)
        "compile_fails_check": sum(1 for p in picks if p.row is not None and compile_fails_check(p.row)),
        "statuses": dict(sorted(Counter(p.status for p in picks if p.row is not None or p.absent).items())),
    }
    out["fast_p_vs_eager"]["0"] = _rate(len(passed), n)
    return out


def _groups(items: list[Any], level: Callable[[Any], int | None] = lambda i: i.level) -> dict[str, list[Any]]:
    """Items (picks, rows) per level, then ``no level`` (when there are levels too), then ``overall``."""
    levels = sorted({lv for i in items if (lv := level(i)) is not None})
    out = {f"level{lv}": [i for i in items if level(i) == lv] for lv in levels}
    if levels and any(level(i) is None for i in items):
        out["no level"] = [i for i in items if level(i) is None]
    out["overall"] = list(items)
    return out


def by_level(picks: list[Pick]) -> dict[str, dict[str, Any]]:
    return {name: summarize(group) for name, group in _groups(picks).items()}


def engine_health(rows: list[Row]) -> dict[str, Any]:
    """Retries, flaky verdicts, engine crashes, out-of-memory and problem_too_large verdicts, per level and
    overall, over every stored verdict; with the verdicts behind each figure listed."""
    judged: list[tuple[Row, Verdict]] = [(r, Verdict.from_dict(r.verdict)) for r in rows if r.verdict]

    def counts(group: list[tuple[Row, Verdict]]) -> dict[str, int]:
        return {"verdicts": len(group),
                "retried": sum(1 for _, v in group if v.attempts),
                "flaky": sum(1 for _, v in group if v.flaky),
                "engine_crashes": sum(1 for _, v in group if v.engine_crash),
                "out_of_memory": sum(1 for _, v in group if v.memory is not None and v.status != "problem_too_large"),
                "problem_too_large": sum(1 for _, v in group if v.status == "problem_too_large")}

    levels = {name: counts(group) for name, group in _groups(judged, level=lambda pair: pair[0].level).items()}

    def memory(v: Verdict) -> dict[str, Any]:
        m = v.memory
        return {"engine_held_bytes": m.engine_held_bytes if m else None,
                "requested_bytes": m.requested_bytes if m else None,
                "device_total_bytes": m.device_total_bytes if m else None,
                "device_free_bytes": m.device_free_bytes if m else None,
                "phase": m.phase if m else ""}

    def first_line(text: str) -> str:
        return text.strip().splitlines()[0][:240] if text.strip() else ""

    return {
        "levels": levels,
        "retried": [{"job": r.job_key, "status": v.status, "flaky": v.flaky, "engine_crash": v.engine_crash,
                     "attempts": [{"status": a.status, "phase": a.phase, "error": first_line(a.error)}
                                  for a in v.attempts]}
                    for r, v in judged if v.attempts],
        "engine_crashes": [r.job_key for r, v in judged if v.engine_crash],
        "out_of_memory": [{"job": r.job_key, "status": v.status, **memory(v)}
                          for r, v in judged if v.memory is not None and v.status != "problem_too_large"],
        "problem_too_large": [{"job": r.job_key, "problem": r.problem, "error": first_line(v.error), **memory(v)}
                              for r, v in judged if v.status == "problem_too_large"],
    }


def suspicious(rows: list[Row], limit: int = 8) -> list[dict[str, Any]]:
    """Verdicts a human should look at: suspicion flags, warn findings, speedups KernelBench would flag."""
    found = []
    for r in rows:
        v = r.verdict or {}
        reasons = list(v.get("flags") or [])
        reasons += [f"{f.get('rule')}: {f.get('evidence') or f.get('message', '')[:80]}"
                    for f in v.get("findings") or [] if f.get("severity") == "warn"]
        if r.status == "ok" and (r.speedup_vs_eager or 0) > EXCESSIVE_SPEEDUP:
            reasons.append(f"speedup {r.speedup_vs_eager:.1f}x vs eager (above {EXCESSIVE_SPEEDUP:g}x)")
        if reasons:
            found.append({"job": r.job_key, "status": r.status, "speedup_vs_eager": r.speedup_vs_eager,
                          "reasons": reasons,
                          "score": len(reasons) + (r.status == "ok") + (r.speedup_vs_eager or 0) / 100})
    found.sort(key=lambda d: -d["score"])
    for d in found:
        d.pop("score")
    return found[:limit]


def slowest(rows: list[Row], limit: int = 5) -> list[dict[str, Any]]:
    timed = sorted((r for r in rows if r.seconds), key=lambda r: -(r.seconds or 0))
    return [{"job": r.job_key, "status": r.status, "seconds": r.seconds} for r in timed[:limit]]


def throughput(sessions: list[dict[str, Any]], rows: list[Row]) -> dict[str, Any]:
    """Wall time over all sessions, candidates per minute, and per GPU its busy seconds and busy share.

    A session killed without an end counts until its last stored verdict. A GPU is busy while its worker
    serves a request or prepares one (the worker's own clock: phases ``worker_busy``, else the request's
    window). Its busy share is that over the time its slot held a job (phases ``suite_slot``): the time
    work was queued for it, leaving out the waits for a build when the queue was empty. Every job that
    held the slot counts, a hung one too (busy until its worker was killed, held until its verdict)."""
    wall = 0.0
    for s in sessions:
        end = s["ended"] or s.get("last_verdict") or s["started"]
        wall += max(0.0, end - s["started"])
    evaluated = sum(1 for r in rows if r.status not in ("missing", "not_started"))
    gpus: dict[str, dict[str, Any]] = {}
    for r in rows:
        found = held_slot(r)
        if found is None:
            continue  # never reached a GPU slot (rejected, build error)
        _, busy, held = found
        g = gpus.setdefault(str(r.gpu), {"requests": 0, "busy_s": 0.0, "held_s": 0.0})
        g["requests"] += 1
        g["busy_s"] += busy
        g["held_s"] += held
    for g in gpus.values():
        g["busy_share"] = g["busy_s"] / g["held_s"] if g["held_s"] > 0 else None
        g["busy_of_wall"] = g["busy_s"] / wall if wall > 0 else None
    return {"wall_s": wall, "evaluated": evaluated,
            "candidates_per_minute": evaluated / (wall / 60) if wall > 0 else None, "gpus": gpus}
