"""`kernelpilot apply SCRIPT [--kernels DIR] [--steps N] [--write]`: approved kernels, swapped into the
script's model, measured end to end.

Runs (each the script's first ``warmup + steps`` steps, seeded alike): the script as it is; the same
once more with another seed-identical run, whose difference from the first is the *yardstick*; one run
per approved kernel swapped in alone; one run with the passing kernels that replace disjoint modules (of
those sets, the one whose gains add up to most: ``_disjoint``); the script as it is once
more at the end (its step times pooled with the first run's, so a drift of the GPU's clocks during the
runs is in the baseline's spread, and the drift is printed). Reported per run: the median step time and
its spread (10th to 90th percentile), the change against the script as it is and whether it is beyond
both spreads, the swapped modules' forward time per step before and after (timed in separate, shorter
runs: the timing hooks cost host time, so no step time is taken from a run that has them) with their
share of the step, and the worst normalized
difference of the first step's output and of the gradients at the first optimizer step against the
unmodified run. A swap passes when it ran the kernel, the script did not fail and both differences
are within ``max(4 x yardstick, floor, 2 x sensitivity)`` (floor: 1e-5 for float32 results, 1e-2 for half
types; sensitivity: the difference one more run makes with the swapped modules' outputs moved by up to one
ulp, ``_bound``).
Nothing in your files changes unless ``--write`` (``kernelpilot.dropin.apply_write``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kernelpilot.dropin.apply_run import RunResult, difference, grad_difference, measure
from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.script_run import misplaced_note, misplaced_options

WARMUP = 3
FLOOR = {"float32": 1e-5, "float64": 1e-9, "float16": 1e-2, "bfloat16": 1e-2}


def find_dropins(kernels: Path, script: Path) -> list[Path]:
    """The approved drop-ins under ``kernels`` extracted from ``script`` (matched by file name)."""
    out = []
    for dropin in sorted(kernels.glob("*/candidate/dropin.py")):
        try:
            origin = json.loads((dropin.parent.parent / "origin.json").read_text())
        except (OSError, ValueError):
            continue
        if Path(str(origin.get("script", ""))).name == script.name:
            out.append(dropin)
    return out


def _floor(result: RunResult) -> float:
    from kernelpilot.dropin.apply_run import flat_tensors

    dtypes = {str(t.dtype).removeprefix("torch.") for t in flat_tensors(result.output)}
    return max((FLOOR.get(d, 1e-5) for d in dtypes), default=1e-5)


def _swap_paths(dropin: Path) -> list[str]:
    """The module paths a drop-in replaces (for a chain: the modules holding it)."""
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    return list(origin.get("paths") or [origin.get("path", "")])


def _where(paths: list[str]) -> str:
    """``model.<first path> (+n)``, or ``model`` for the root."""
    return ("model." + paths[0] if paths and paths[0] else "model") + (f" (+{len(paths) - 1})" if len(paths) > 1 else "")


def _bound(script: Path, argv: list[str], base: RunResult, bound: float, dropins: list[Path],
           compile_root: bool) -> tuple[float, str]:
    """The bound for swapping ``dropins``: the run-to-run yardstick and dtype floor (``bound``), or twice what
    moving the swapped modules' outputs by up to one ulp changes end to end, whichever is larger. In half
    precision a deep model amplifies rounding: a kernel that rounds differently, and no worse, than the
    original moves the result by about that much; the swap's own verdict (against float64) is where its
    accuracy is checked, this run only that the model still computes the same thing."""
    paths = list(dict.fromkeys(p for d in dropins for p in _swap_paths(d)))
    res = measure(script, argv, steps=1, warmup=0, dropins=[], compile_root=compile_root, perturb=paths)
    if res.error:
        return bound, f"not measured ({res.error}); bound {bound:.1e}"
    out = difference(res.output, base.output)
    grad = grad_difference(res.grads, base.grads) or 0.0
    mine = max(bound, 2 * out, 2 * grad)
    return mine, f"outputs {out:.1e}, gradients {grad:.1e}; bound {mine:.1e}"


def _label(dropin: Path, result: RunResult) -> str:
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    what = ""
    if origin.get("kind") == "chain":
        calls = str(origin.get("chain")).split(" -> ")
        short = " -> ".join(calls) if len(calls) <= 3 else f"{calls[0]} -> .. -> {calls[-1]} ({len(calls)} calls)"
        what = f"chain {short} in "
    return what + _where(result.swapped.get(str(dropin)) or [])


def apply_command(args: Any) -> int:
    script = Path(args.script)
    if not script.is_file():
        raise KernelpilotError(f"{script} does not exist; pass the training or inference script the kernels came from.")
    kernels = Path(getattr(args, "kernels", None) or "problems")
    note = misplaced_note(args, script)
    if note:
        print(note, file=sys.stderr)
    dropins = find_dropins(kernels, script)
    if not dropins:
        after = (f", and the --kernels after {script} went to it as its own argument" if "--kernels" in {
            t.split("=", 1)[0] for t in misplaced_options(args)} else "")
        raise KernelpilotError(f"no approved kernel extracted from {script.name} under {kernels}/ (looked for "
                               f"*/candidate/dropin.py, written on approval){after}; pass --kernels DIR before SCRIPT: "
                               f"kernelpilot apply --kernels DIR {script}.")
    argv = list(getattr(args, "script_args", None) or [])
    steps = max(int(getattr(args, "steps", None) or 20), 1)
    compile_root = bool(getattr(args, "compile", False))
    print(f"{len(dropins)} approved kernel(s): " + ", ".join(str(d.parent.parent.name) for d in dropins))
    mode = "torch.compile" if compile_root else "eager (the script as it is)"
    print(f"{script}: {steps} steps after {WARMUP} warm-up, {mode}")

    base = measure(script, argv, steps=steps, warmup=WARMUP, dropins=[], compile_root=compile_root)
    if base.error:
        raise KernelpilotError(f"{script} fails on its own: {base.error}; fix it first.")
    again = measure(script, argv, steps=1, warmup=0, dropins=[], compile_root=compile_root)
    yard_out = difference(again.output, base.output)
    yard_grad = grad_difference(again.grads, base.grads)
    bound = max(4 * yard_out, 4 * (yard_grad or 0.0), _floor(base))
    first_ms, first_spread = base.median(WARMUP)
    print(f"as it is: step {first_ms:.3f} ms median (spread {first_spread:.3f} ms); yardstick (two seeded runs): "
          f"outputs {yard_out:.1e}, gradients {_fmt(yard_grad)}; bound {bound:.1e}")
    rows = []
    passed: list[Path] = []
    bounds: dict[Path, float] = {}
    for dropin in dropins:
        bounds[dropin], said = _bound(script, argv, base, bound, [dropin], compile_root)
        print(f"one-ulp sensitivity of {_where(_swap_paths(dropin))}: {said}")
        res = measure(script, argv, steps=steps, warmup=WARMUP, dropins=[dropin], compile_root=compile_root)
        verdict = _verdict(res, base, dropin, bounds[dropin])
        rows.append((_label(dropin, res), res, dropin, verdict))
        if verdict == "ok":
            passed.append(dropin)
    all_row = None
    together, apart = _disjoint(passed, {d: r for _, r, d, _ in rows}, first_ms)
    for dropin, other in apart:
        if other is None:
            alone = _result_of(rows, dropin)
            print(f"not combined: {_label(dropin, alone)}: alone it did not make the step faster "
                  f"({alone.median(WARMUP)[0] - first_ms:+.3f} ms), so the swaps that gain the most together leave it out")
            continue
        print(f"not combined: {_label(dropin, _result_of(rows, dropin))} and {_label(other, _result_of(rows, other))}: "
              f"one is installed where the other takes modules out of the run (the swaps kept gain the most together)")
    if len(together) > 1:
        all_bound, said = _bound(script, argv, base, bound, together, compile_root)
        print(f"one-ulp sensitivity of the {len(together)} passing swaps together: {said}")
        all_res = measure(script, argv, steps=steps, warmup=WARMUP, dropins=together, compile_root=compile_root)
        all_row = (f"{len(together)} passing swaps together", all_res, _verdict(all_res, base, None, all_bound))
    closing = measure(script, argv, steps=steps, warmup=WARMUP, dropins=[], compile_root=compile_root)
    if not closing.error:
        end_ms, _ = closing.median(WARMUP)
        print(f"as it is, again after the swaps: step {end_ms:.3f} ms median (drift {end_ms - first_ms:+.3f} ms); "
              f"the baseline below pools both runs")
        base.step_ms = base.step_ms[WARMUP:] + closing.step_ms[WARMUP:]
        base_ms, base_spread = base.median(0)
    else:
        base_ms, base_spread = first_ms, first_spread
        base.step_ms = base.step_ms[WARMUP:]
    parts = _parts(script, argv, steps, dropins, compile_root)
    print(f"{'swap':<44} {'step ms':>9} {'spread':>7} {'change':>15} {'vs spread':>9} {'part fwd ms':>19} "
          f"{'share':>6} {'outputs':>8} {'grads':>8}  result")
    print(f"{'as it is':<44} {base_ms:9.3f} {base_spread:7.3f} {'':>15} {'':>9} {'':>19} {'':>6} {'':>8} {'':>8}")
    if compile_root:
        print("(part fwd ms and share: not measured under torch.compile, whose graph the timing hooks would break)")
    for label, res, dropin, verdict in rows:
        print(_row(label, res, base, base_ms, base_spread, parts.get(str(dropin)), verdict))
    if all_row is not None:
        print(_row(all_row[0], all_row[1], base, base_ms, base_spread, None, all_row[2]))
    failed = [r for r in rows if r[3] != "ok"]
    for label, _, _, verdict in failed:
        print(f"left out: {label}: {verdict}")
    if compile_root and passed and not _any_faster([(r, v) for _, r, _, v in rows], base_ms, base_spread):
        print(COMPILE_NOTE)
    if getattr(args, "write", False):
        from kernelpilot.dropin.apply_write import write_install

        if not passed:
            raise KernelpilotError("no swap passed, so there is nothing to write.")
        results = {d: r for _, r, d, _ in rows}
        chosen, notes = _to_write(together, results, all_row[2] if all_row else None, base_ms, base_spread)
        for note in notes:
            print(note)
        if not chosen:
            raise KernelpilotError("every passing swap made the step slower beyond the spread, so there is nothing "
                                   "to write.")
        print("written: " + ", ".join(_label(d, results[d]) for d in chosen) + " (what was measured"
              + (" together" if len(chosen) > 1 else "") + ")")
        write_install(script, chosen, argv, yes=bool(getattr(args, "yes", False)))
    elif passed:
        print("nothing was changed; pass --write to add the install(model) call to your script (shown, then one commit)")
    return 0 if passed else 1


def _verdict(res: RunResult, base: RunResult, dropin: Path | None, bound: float) -> str:
    if res.error:
        return f"the script failed with it: {res.error}"
    keys = [str(dropin)] if dropin is not None else list(res.stats)
    for key in keys:
        stats = res.stats.get(key, {})
        if not stats.get("kernel") and not stats.get("compiled_kernel"):  # eager calls, or traced into the graph
            where = ", ".join("model." + p for p in res.swapped.get(key, [])) or "its module"
            return (f"no call of {where} matched the recorded shapes and dtypes ({stats.get('original', 0)} call(s) ran "
                    f"the original forward); extract it again from this run")
    out = difference(res.output, base.output)
    grad = grad_difference(res.grads, base.grads)
    if out > bound:
        return f"outputs differ: {out:.1e} > {bound:.1e}"
    if grad is not None and grad > bound:
        return f"gradients differ: {grad:.1e} > {bound:.1e}"
    return "ok"


def _parts(script: Path, argv: list[str], steps: int, dropins: list[Path],
           compile_root: bool) -> dict[str, tuple[float | None, float | None]]:
    """Forward ms per step (median) of each swapped module before (nothing swapped) and after (that drop-in
    alone swapped in), each from a run of its own with timing hooks, at most 10 steps; none under
    torch.compile, where the parts are not timed (``kernelpilot.dropin.apply_run``)."""
    if compile_root:
        return {}
    n = min(steps, 10)
    before = measure(script, argv, steps=n, warmup=WARMUP, dropins=dropins, swap=False, time_parts=True)
    out: dict[str, tuple[float | None, float | None]] = {}
    for dropin in dropins:
        after = measure(script, argv, steps=n, warmup=WARMUP, dropins=[dropin], time_parts=True)
        out[str(dropin)] = (_mid(before.part_ms.get(str(dropin))), _mid(after.part_ms.get(str(dropin))))
    return out


def _result_of(rows: list[tuple[str, RunResult, Path, str]], dropin: Path) -> RunResult:
    return next(r for _, r, d, _ in rows if d == dropin)


def _footprint(dropin: Path) -> tuple[list[str], set[str], list[str]]:
    """Where a swap installs its forward, and what it takes out of the run: a module's kernel, the module's
    whole subtree; a chain's holder replay, the holder's own forward and the children it inlines (the children
    it calls as modules still run, swaps of their own included: ``holder_calls``)."""
    origin = json.loads((dropin.parent.parent / "origin.json").read_text())
    installs = _swap_paths(dropin)
    holder = origin.get("holder") or {}
    if origin.get("kind") != "chain" or "modules" not in holder:
        return installs, set(), installs
    inlined = [f"{h}.{rel}" if h else rel for h in installs for rel in holder.get("inlined", [])]
    return installs, set(installs), inlined


def _overlap(a: tuple[list[str], set[str], list[str]], b: tuple[list[str], set[str], list[str]]) -> bool:
    """Whether either swap installs its forward where the other takes modules out of the run."""
    def inside(path: str, f: tuple[list[str], set[str], list[str]]) -> bool:
        return path in f[1] or any(s == "" or path == s or path.startswith(s + ".") for s in f[2])

    return any(inside(p, b) for p in a[0]) or any(inside(p, a) for p in b[0])


def _disjoint(passed: list[Path], results: dict[Path, RunResult],
              base_ms: float) -> tuple[list[Path], list[tuple[Path, Path | None]]]:
    """The passing swaps to run together: of the sets whose swaps replace disjoint modules, the one whose
    measured gains add up to the most (every set when there are at most 12 swaps, else the most gaining first);
    and each one left out, with a swap of the set it overlaps."""
    gain = {d: base_ms - results[d].median(WARMUP)[0] for d in passed}
    paths = {d: _footprint(d) for d in passed}
    ordered = sorted(passed, key=lambda d: -gain[d])
    best: list[Path] = []
    if len(ordered) <= 12:
        best_gain = float("-inf")
        for mask in range(1, 1 << len(ordered)):
            chosen = [d for i, d in enumerate(ordered) if mask >> i & 1]
            if any(_overlap(paths[a], paths[b]) for i, a in enumerate(chosen) for b in chosen[i + 1:]):
                continue
            total = sum(gain[d] for d in chosen)
            if total > best_gain:
                best, best_gain = chosen, total
    else:
        for dropin in ordered:
            if not any(_overlap(paths[dropin], paths[t]) for t in best):
                best.append(dropin)
    # left out for an overlap (named by the most gaining swap it overlaps), or, overlapping none, for gaining nothing
    apart = [(d, next((t for t in best if _overlap(paths[d], paths[t])), None)) for d in ordered if d not in best]
    return [d for d in passed if d in best], apart


COMPILE_NOTE = ("under torch.compile no swap made the step faster beyond the spread: Inductor fuses these modules' "
                "operators itself, and a custom operator is a boundary it does not fuse across; a kernel gains here "
                "only where it beats Inductor's own kernels on a large share of the compiled step")


def _any_faster(results: list[tuple[RunResult, str]], base_ms: float, base_spread: float) -> bool:
    """Whether any passing swap (its run and verdict) made the step faster beyond both spreads."""
    for res, verdict in results:
        if verdict == "ok" and not res.error and res.step_ms:
            ms, spread = res.median(WARMUP)
            if _beyond(ms - base_ms, base_spread, spread) == "faster":
                return True
    return False


def _to_write(together: list[Path], results: dict[Path, RunResult], together_verdict: str | None,
              base_ms: float, base_spread: float) -> tuple[list[Path], list[str]]:
    """The swaps ``--write`` installs: the set that was run together (so never two that take each other's
    modules out of the run, nor one left out for gaining nothing), less any that alone made the step slower
    beyond the spread; if the set failed when run together, its most gaining swap alone. With the notes to
    print for what is not written."""
    notes: list[str] = []
    keep: list[Path] = []
    for d in together:
        ms, spread = results[d].median(WARMUP)
        if _beyond(ms - base_ms, base_spread, spread) == "slower":
            notes.append(f"not written: {_label(d, results[d])}: it made the step slower ({ms - base_ms:+.3f} ms), "
                         "beyond the spread")
        else:
            keep.append(d)
    if len(keep) > 1 and together_verdict not in (None, "ok"):
        best = min(keep, key=lambda d: results[d].median(WARMUP)[0])
        notes.append(f"not written together: the swaps run together gave {together_verdict}; only the most gaining "
                     f"one, {_label(best, results[best])}, is written")
        keep = [best]
    return keep, notes


def _mid(values: list[float] | None) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def _beyond(change: float, base_spread: float, spread: float) -> str:
    """``faster`` or ``slower`` when the change is larger than both spreads, else ``within``."""
    if abs(change) <= max(base_spread, spread):
        return "within"
    return "faster" if change < 0 else "slower"


def _row(label: str, res: RunResult, base: RunResult, base_ms: float, base_spread: float,
         part_ms: tuple[float | None, float | None] | None, verdict: str) -> str:
    if res.error or not res.step_ms:
        return f"{label:<44} {'-':>9} {'-':>7} {'-':>15} {'-':>9} {'-':>19} {'-':>6} {'-':>8} {'-':>8}  {verdict}"
    ms, spread = res.median(WARMUP)
    change = f"{ms - base_ms:+.3f} ({100 * (ms - base_ms) / base_ms:+.1f}%)" if base_ms else "-"
    before_ms, after_ms = part_ms or (None, None)
    part = " -> ".join("-" if v is None else f"{v:.3f}" for v in (before_ms, after_ms)) if part_ms else "-"
    share = f"{100 * before_ms / base_ms:.1f}%" if before_ms is not None and base_ms else "-"
    out = difference(res.output, base.output)
    grad = grad_difference(res.grads, base.grads)
    return (f"{label:<44} {ms:9.3f} {spread:7.3f} {change:>15} {_beyond(ms - base_ms, base_spread, spread):>9} "
            f"{part:>19} {share:>6} {out:8.1e} {_fmt(grad):>8}  {verdict}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"
