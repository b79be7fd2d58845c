"""The swaps of ``kernelpilot apply``: what each drop-in replaces and how it is named, where it installs its
forward and what it takes out of the run (``footprint``), which passing swaps run together (``disjoint``: of
the sets of swaps replacing disjoint modules, the one whose gains add up to most) and which ``--write``
installs (``to_write``)."""

from __future__ import annotations

import json
from pathlib import Path

from kernelpilot.dropin.apply_run import WARMUP, RunResult


def swap_paths(dropin: Path) -> list[str]:
    """The module paths a drop-in replaces (for a chain: the modules holding it)."""
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    return list(origin.get("paths") or [origin.get("path", "")])


def swap_where(paths: list[str]) -> str:
    """``model.<first path> (+n)``, or ``model`` for the root."""
    return (("model." + paths[0] if paths and paths[0] else "model")
            + (f" (+{len(paths) - 1})" if len(paths) > 1 else ""))


def swap_label(dropin: Path, result: RunResult) -> str:
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    what = ""
    if origin.get("kind") == "chain":
        calls = str(origin.get("chain")).split(" -> ")
        short = " -> ".join(calls) if len(calls) <= 3 else f"{calls[0]} -> .. -> {calls[-1]} ({len(calls)} calls)"
        what = f"chain {short} in "
    return what + swap_where(result.swapped.get(str(dropin)) or [])


def footprint(dropin: Path) -> tuple[list[str], set[str], list[str]]:
    """Where a swap installs its forward, and what it takes out of the run: a module's kernel, the module's
    whole subtree; a chain's holder replay, the holder's own forward and the children it inlines (the children
    it calls as modules still run, swaps of their own included: ``holder_calls``)."""
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    installs = swap_paths(dropin)
    holder = origin.get("holder") or {}
    if origin.get("kind") != "chain" or "modules" not in holder:
        return installs, set(), installs
    inlined = [f"{h}.{rel}" if h else rel for h in installs for rel in holder.get("inlined", [])]
    return installs, set(installs), inlined


def overlap(a: tuple[list[str], set[str], list[str]], b: tuple[list[str], set[str], list[str]]) -> bool:
    """Whether either swap installs its forward where the other takes modules out of the run."""
    def inside(path: str, f: tuple[list[str], set[str], list[str]]) -> bool:
        return path in f[1] or any(s == "" or path == s or path.startswith(s + ".") for s in f[2])

    return any(inside(p, b) for p in a[0]) or any(inside(p, a) for p in b[0])


def disjoint(passed: list[Path], results: dict[Path, RunResult],
              base_ms: float) -> tuple[list[Path], list[tuple[Path, Path | None]]]:
    """The passing swaps to run together: of the sets whose swaps replace disjoint modules, the one whose
    measured gains add up to the most (every set when there are at most 12 swaps, else the most gaining first);
    and each one left out, with a swap of the set it overlaps."""
    gain = {d: base_ms - results[d].median(WARMUP)[0] for d in passed}
    paths = {d: footprint(d) for d in passed}
    ordered = sorted(passed, key=lambda d: -gain[d])
    best: list[Path] = []
    if len(ordered) <= 12:
        best_gain = float("-inf")
        for mask in range(1, 1 << len(ordered)):
            chosen = [d for i, d in enumerate(ordered) if mask >> i & 1]
            if any(overlap(paths[a], paths[b]) for i, a in enumerate(chosen) for b in chosen[i + 1:]):
                continue
            total = sum(gain[d] for d in chosen)
            if total > best_gain:
                best, best_gain = chosen, total
    else:
        for dropin in ordered:
            if not any(overlap(paths[dropin], paths[t]) for t in best):
                best.append(dropin)
    # left out for an overlap (named by the most gaining swap it overlaps), or, overlapping none, for gaining nothing
    apart = [(d, next((t for t in best if overlap(paths[d], paths[t])), None)) for d in ordered if d not in best]
    return [d for d in passed if d in best], apart


COMPILE_NOTE = ("under torch.compile no swap made the step faster beyond the spread: Inductor fuses these modules' "
                "operators itself, and a custom operator is a boundary it does not fuse across; a kernel gains here "
                "only where it beats Inductor's own kernels on a large share of the compiled step")


def any_faster(results: list[tuple[RunResult, str]], base_ms: float, base_spread: float) -> bool:
    """Whether any passing swap (its run and verdict) made the step faster beyond both spreads."""
    for res, verdict in results:
        if verdict == "ok" and not res.error and res.step_ms:
            ms, spread = res.median(WARMUP)
            if beyond(ms - base_ms, base_spread, spread) == "faster":
                return True
    return False


def to_write(together: list[Path], results: dict[Path, RunResult], together_verdict: str | None,
              base_ms: float, base_spread: float) -> tuple[list[Path], list[str]]:
    """The swaps ``--write`` installs: the set that was run together (so never two that take each other's
    modules out of the run, nor one left out for gaining nothing), less any that alone made the step slower
    beyond the spread; if the set failed when run together, its most gaining swap alone. With the notes to
    print for what is not written."""
    notes: list[str] = []
    keep: list[Path] = []
    for d in together:
        ms, spread = results[d].median(WARMUP)
        if beyond(ms - base_ms, base_spread, spread) == "slower":
            notes.append(f"not written: {swap_label(d, results[d])}: it made the step slower ({ms - base_ms:+.3f} ms), "
                         "beyond the spread")
        else:
            keep.append(d)
    if len(keep) > 1 and together_verdict not in (None, "ok"):
        best = min(keep, key=lambda d: results[d].median(WARMUP)[0])
        notes.append(f"not written together: the swaps run together gave {together_verdict}; only the most gaining "
                     f"one, {swap_label(best, results[best])}, is written")
        keep = [best]
    return keep, notes


def beyond(change: float, base_spread: float, spread: float) -> str:
    """``faster`` or ``slower`` when the change is larger than both spreads, else ``within``."""
    if abs(change) <= max(base_spread, spread):
        return "within"
    return "faster" if change < 0 else "slower"
