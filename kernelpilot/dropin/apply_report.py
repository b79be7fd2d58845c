"""What `kernelpilot apply` reports of its runs: per run one record (the printed table's row and, with
``--summary FILE``, an entry of the JSON file), and the judgements behind it.

- **Step time**: the median and spread (10th to 90th percentile) of the timed steps, the change against the
  script as it is, and the smallest change the comparison resolves (``resolves_ms``: the larger of the two
  spreads); a change no larger is ``within``, else ``faster`` or ``slower`` (``change``).
- **Memory**: peak allocated and reserved bytes (PyTorch) and NVML's used bytes over the measured steps, and
  what the run saved against the script as it is (``kernelpilot.dropin.apply_measure``; None on the CPU).
- **Loss**: the loss at every step against the unmodified run's, judged within the band (``loss_band``) made by
  the run with the same modules' outputs moved by one ulp (apply's sensitivity run) over the same steps:
  ``inside`` or ``outside``; ``loss_max_diff`` and ``yardstick`` (the band's widest) are the numbers.
- **torch.compile**: Dynamo's graph breaks and recompilations in the run, flagged when a swap's run has more
  than the unmodified compiled run (``introduced``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.dropin.apply_run import WARMUP, RunResult, difference, grad_difference
from kernelpilot.dropin.apply_swaps import beyond

LOSS_FLOOR = {"float32": 1e-5, "float64": 1e-9, "float16": 1e-2, "bfloat16": 1e-2}  # relative to the loss


@dataclass
class Row:
    """One measured run with drop-ins swapped in: its label, result, drop-in (None: the swaps run together),
    verdict ("ok" or why not) and loss band."""

    label: str
    res: RunResult
    dropin: Path | None
    verdict: str
    band: list[float | None] | None = None


def _losses_like(base: RunResult, other: RunResult | None) -> list[float | None] | None:
    """``other``'s losses where it ran as many steps as ``base`` without an error; else None."""
    if other is None or other.error or other.losses is None or base.losses is None:
        return None
    return other.losses if len(other.losses) == len(base.losses) else None


def loss_band(base: RunResult, sensitivity: RunResult | None,
              noise: RunResult | None = None) -> list[float | None] | None:
    """Per step, how far a swap's loss may be from the unmodified run's: twice the largest difference the
    sensitivity run's loss has had from it up to that step (a kernel that rounds differently, and no worse, moves
    the loss about that much, and a training run's differences grow), at least the loss dtype's floor (1e-5
    relative for float32, 1e-2 for half types). ``noise``: a second unmodified run, for a script whose runs differ
    from each other; its difference counts as the sensitivity run's does. None at a step without a loss, and None
    when the unmodified run recorded none."""
    if base.losses is None:
        return None
    floor = LOSS_FLOOR.get(base.loss_dtype, 1e-5)
    others = [o for o in (_losses_like(base, sensitivity), _losses_like(base, noise)) if o is not None]
    band: list[float | None] = []
    widest = 0.0
    for i, loss in enumerate(base.losses):
        if loss is None:
            band.append(None)
            continue
        for losses in others:
            moved = losses[i]
            if moved is not None and math.isfinite(moved - loss):
                widest = max(widest, abs(moved - loss))
        band.append(max(2 * widest, floor * max(abs(loss) if math.isfinite(loss) else 0.0, 1.0)))
    return band


def max_gap(run: RunResult, base: RunResult) -> float | None:
    """The largest difference of ``run``'s loss from ``base``'s over the steps both have; None without losses."""
    losses = _losses_like(base, run)
    if losses is None or base.losses is None:
        return None
    gaps = [_gap(a, b) for a, b in zip(losses, base.losses) if b is not None]
    return max(gaps, default=None)


def _gap(a: float | None, b: float) -> float:
    if a is None:
        return math.inf
    return abs(a - b) if math.isfinite(a - b) else (0.0 if a == b else math.inf)


def judge_loss(res: RunResult, base: RunResult,
               band: list[float | None] | None) -> tuple[str | None, float | None, str]:
    """("inside" or "outside", the largest difference from the unmodified run's loss over the steps that have
    one, why it is outside), or (None, None, why not judged)."""
    if res.error:
        return None, None, "the run failed"
    if base.losses is None or band is None:
        return None, None, "no loss seen (the script calls no backward and its model returns no loss)"
    if res.losses is None or len(res.losses) != len(base.losses):
        return "outside", math.inf, "its run recorded no loss at some step"
    steps = [(i, _gap(a, b), w) for i, (a, b, w) in enumerate(zip(res.losses, base.losses, band))
             if b is not None and w is not None]
    worst = max((d for _, d, _ in steps), default=0.0)
    out = next(((i, d, w) for i, d, w in steps if not d <= w), None)
    if out is None:
        return "inside", worst, ""
    return "outside", worst, f"loss outside the band from step {out[0]}: {out[1]:.1e} > {out[2]:.1e}"


def _saved(base: int | None, run: int | None) -> tuple[int | None, float | None]:
    if base is None or run is None:
        return None, None
    return base - run, (100.0 * (base - run) / base if base else None)


def record(label: str, res: RunResult, base: RunResult, base_ms: float, base_spread: float, *,
           kind: str, verdict: str, band: list[float | None] | None = None) -> dict[str, Any]:
    """One run's entry of the report (``kind``: "as it is", "swap" or "together")."""
    mem = res.memory
    rec: dict[str, Any] = {"label": label, "kind": kind, "verdict": verdict, "error": res.error or None,
                           "peak_mem_bytes": mem.peak_mem_bytes, "peak_reserved_bytes": mem.peak_reserved_bytes,
                           "nvml_used_bytes": mem.nvml_used_bytes, "nvml_what": mem.nvml_what or None,
                           "memory_note": mem.note or None, "loss": res.losses, "loss_dtype": res.loss_dtype or None}
    if res.step_ms and not res.error:  # a failed run's step times are not its
        pooled = kind == "as it is"  # its step_ms: every run as it is, past their warm-ups (_pooled_baseline)
        ms, spread = (base_ms, base_spread) if pooled else res.median(WARMUP)
        rec.update(step_ms=ms, spread_ms=spread, resolves_ms=max(base_spread, spread),
                   timed_steps=len(res.step_ms if pooled else res.timed(WARMUP)))
    comp = res.compiled
    rec.update(graph_breaks=comp.graph_breaks if comp else None, recompiles=comp.recompiles if comp else None,
               graphs=comp.graphs if comp else None, break_reasons=comp.break_reasons if comp else None,
               recompile_reasons=comp.recompile_reasons if comp else None)
    if kind == "as it is":
        return _complete(rec)
    if "step_ms" in rec:  # before _complete: only a run that did not fail has it
        change = rec["step_ms"] - base_ms
        rec.update(change_ms=change, change_pct=100 * change / base_ms if base_ms else None,
                   change=beyond(change, base_spread, rec["spread_ms"]))
    rec["mem_saved_bytes"], rec["mem_saved_pct"] = _saved(base.memory.peak_mem_bytes, mem.peak_mem_bytes)
    rec["reserved_saved_bytes"], _ = _saved(base.memory.peak_reserved_bytes, mem.peak_reserved_bytes)
    judged, worst, why = judge_loss(res, base, band)
    rec.update(loss_verdict=judged, loss_max_diff=worst, loss_note=why or None, loss_band=band,
               yardstick=max((w for w in band or [] if w is not None), default=None),
               outputs_diff=difference(res.output, base.output), grads_diff=grad_difference(res.grads, base.grads))
    introduced = [f"{n - b} {what}" for what, n, b in (
        ("graph break(s)", rec["graph_breaks"], base.compiled.graph_breaks if base.compiled else None),
        ("recompilation(s)", rec["recompiles"], base.compiled.recompiles if base.compiled else None))
        if n is not None and b is not None and n > b]
    rec["introduced"] = introduced or None
    return _complete(rec)


# every record has these keys (None where they do not apply: the unmodified run is the reference of the others)
FIELDS = ("step_ms", "spread_ms", "resolves_ms", "change", "change_ms", "change_pct", "peak_mem_bytes",
          "peak_reserved_bytes", "nvml_used_bytes", "mem_saved_bytes", "mem_saved_pct", "reserved_saved_bytes",
          "loss", "loss_verdict", "loss_max_diff", "loss_note", "loss_band", "yardstick", "graph_breaks", "recompiles",
          "introduced", "outputs_diff", "grads_diff", "verdict")


def _complete(rec: dict[str, Any]) -> dict[str, Any]:
    for key in FIELDS:
        rec.setdefault(key, None)
    return rec


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


HEAD = (f"{'swap':<44} {'step ms':>9} {'spread':>7} {'change':>15} {'vs spread':>9} {'part fwd ms':>19} {'share':>6} "
        f"{'peak MiB':>9} {'mem saved':>9} {'loss':>7} {'outputs':>8} {'grads':>8}")


def table_row(rec: dict[str, Any], base_ms: float, part_ms: tuple[float | None, float | None] | None,
              compiled: bool) -> str:
    """One line of the printed table (the header is ``HEAD``, with "breaks recomp" under torch.compile)."""
    peak = _num(None if rec["peak_mem_bytes"] is None else rec["peak_mem_bytes"] / 2 ** 20, ".1f")
    tail = f" {_num(rec['graph_breaks'], 'd'):>6} {_num(rec['recompiles'], 'd'):>6}" if compiled else ""
    if rec["kind"] == "as it is":
        return (f"{rec['label']:<44} {rec['step_ms']:9.3f} {rec['spread_ms']:7.3f} {'':>15} {'':>9} {'':>19} "
                f"{'':>6} {peak:>9} {'':>9} {'':>7} {'':>8} {'':>8}{tail}")
    if rec["step_ms"] is None:
        return (f"{rec['label']:<44} {'-':>9} {'-':>7} {'-':>15} {'-':>9} {'-':>19} {'-':>6} {'-':>9} {'-':>9} "
                f"{'-':>7} {'-':>8} {'-':>8}{tail}  {rec['verdict']}")
    ms, change = rec["step_ms"], rec["change_ms"]
    said = f"{change:+.3f} ({100 * change / base_ms:+.1f}%)" if base_ms else "-"
    before_ms, after_ms = part_ms or (None, None)
    part = " -> ".join("-" if v is None else f"{v:.3f}" for v in (before_ms, after_ms)) if part_ms else "-"
    share = f"{100 * before_ms / base_ms:.1f}%" if before_ms is not None and base_ms else "-"
    saved = _num(rec["mem_saved_pct"], "+.1f") + ("%" if rec["mem_saved_pct"] is not None else "")
    return (f"{rec['label']:<44} {ms:9.3f} {rec['spread_ms']:7.3f} {said:>15} {rec['change']:>9} {part:>19} "
            f"{share:>6} {peak:>9} {saved:>9} {rec['loss_verdict'] or '-':>7} {rec['outputs_diff']:8.1e} "
            f"{_num(rec['grads_diff'], '.1e'):>8}{tail}  {rec['verdict']}")


def print_notes(records: list[dict[str, Any]], base_ms: float, base_spread: float) -> None:
    """What the table's columns cannot say: the resolution, why memory was not measured, what a swap introduced
    under torch.compile."""
    print(f"resolution: a change of at most {base_spread:.3f} ms ({100 * base_spread / base_ms if base_ms else 0:.1f}% "
          "of the step), or of the run's own spread if larger, is within the spread (more --steps narrow it)")
    notes = dict.fromkeys(r["memory_note"] for r in records if r.get("memory_note"))
    for note in notes:
        print(f"memory: {note}")
    for rec in records:
        if rec.get("introduced"):
            reasons = (rec.get("break_reasons") or []) + (rec.get("recompile_reasons") or [])
            print(f"under torch.compile, {rec['label']} introduced {' and '.join(rec['introduced'])} beyond the "
                  "unmodified compiled run" + (f": {reasons[0]}" if reasons else ""))


def write_summary(path: Path, header: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """``--summary FILE``: the header (script, mode, steps, commit ...) and every run's record, as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain({**header, "runs": records}), indent=2) + "\n")
    print(f"summary written to {path}")


def _plain(value: Any) -> Any:
    """``value`` as strict JSON takes it: paths as text, an infinite or undefined number as "inf" or "nan"."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Path):
        return str(value)
    return value
