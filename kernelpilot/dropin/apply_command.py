"""`kernelpilot apply SCRIPT [--kernels DIR] [--steps N] [--write]`: approved kernels, swapped into the
script's model, measured end to end.

Runs (each the script's first ``warmup + steps`` steps, seeded alike): the script as it is; the same
once more with another seed-identical run, whose difference from the first is the *yardstick*; one run
per approved kernel swapped in alone; one run with the passing kernels that replace disjoint modules (of
those sets, the one whose gains add up to most: ``disjoint``); the script as it is once
more at the end (its step times pooled with the first run's, so a drift of the GPU's clocks during the
runs is in the baseline's spread, and the drift is printed). Reported per run
(``kernelpilot.dropin.apply_report``; ``--summary FILE`` writes it as JSON): the median step time and
its spread (10th to 90th percentile), the change against the script as it is and whether it is beyond
both spreads, the swapped modules' forward time per step before and after (timed in separate, shorter
runs: the timing hooks cost host time, so no step time is taken from a run that has them) with their
share of the step, the peak device memory of the measured steps and what it saved, the loss at every step
against the unmodified run's, Dynamo's graph breaks and recompilations under ``--compile``, and the worst
normalized difference of the first step's output and of the gradients at the first optimizer step against the
unmodified run. A swap passes when it ran the kernel, the script did not fail, both differences
are within ``max(4 x yardstick, floor, 2 x sensitivity)`` (floor: 1e-5 for float32 results, 1e-2 for half
types; sensitivity: the difference one more run makes with the swapped parts' outputs, and the gradients their
backward returns, moved by up to one ulp, ``_bound``) and its loss stayed inside the band that run's loss makes over
the same steps (``loss_band``), widened by a second full run as it is where two seeded runs differ (``_yardstick``).
Nothing in your files changes unless ``--write`` (``kernelpilot.dropin.apply_write``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelpilot.code_version import running_version
from kernelpilot.dropin.apply_report import (
    HEAD,
    Row,
    judge_loss,
    loss_band,
    max_gap,
    print_notes,
    record,
    table_row,
    write_summary,
)
from kernelpilot.dropin.apply_run import (
    WARMUP,
    RunResult,
    difference,
    flat_tensors,
    grad_difference,
    measure,
)
from kernelpilot.dropin.apply_swaps import (
    COMPILE_NOTE,
    any_faster,
    disjoint,
    swap_label,
    swap_paths,
    swap_where,
    to_write,
)
from kernelpilot.dropin.apply_write import write_install
from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.script_run import misplaced_note, misplaced_options

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
    dtypes = {str(t.dtype).removeprefix("torch.") for t in flat_tensors(result.output)}
    return max((FLOOR.get(d, 1e-5) for d in dtypes), default=1e-5)


COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")  # the compiles a user tuning a step would try
COMPILED = ("the model's forward (model.forward) and F.cross_entropy (nn.CrossEntropyLoss too), so a loss the script "
            "computes after the forward is compiled as well; any other loss computed in the script runs eagerly")


@dataclass
class _Script:
    """The script to run, its arguments, the timed steps per run, whether its model's forward is compiled and
    in which torch.compile mode."""

    path: Path
    argv: list[str]
    steps: int
    compile_root: bool
    compile_mode: str = "default"
    baselines: dict[str, Any] = field(default_factory=dict)  # --compile: each mode's own run, as it is
    noise: RunResult | None = None  # a second full run as it is, where two seeded runs differ (_yardstick)

    def measure(self, dropins: list[Path], *, steps: int | None = None, warmup: int = WARMUP) -> RunResult:
        return measure(self.path, self.argv, steps=self.steps if steps is None else steps, warmup=warmup,
                       dropins=dropins, compile_root=self.compile_root, compile_mode=self.compile_mode)


def compile_modes(text: str | None) -> list[str]:
    """``--compile-modes``: torch.compile modes, comma-separated (default: both of COMPILE_MODES)."""
    modes = [m.strip() for m in (text or ",".join(COMPILE_MODES)).split(",") if m.strip()]
    known = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    wrong = [m for m in modes if m not in known]
    if wrong or not modes:
        raise KernelpilotError(f"--compile-modes: {', '.join(wrong) or 'none given'} is not a torch.compile mode; "
                               f"use any of {', '.join(known)}, comma-separated.")
    return list(dict.fromkeys(modes))


def _best_compile(run: _Script, modes: list[str]) -> tuple[_Script, RunResult | None]:
    """The script compiled in each mode, as it is: the faster mode's run is the baseline, and every swap is
    compiled in that mode too. Returns that script, with what each mode gave in its ``baselines``, and its run
    (None when no mode ran)."""
    seen: dict[str, Any] = {}
    best: tuple[float, _Script, RunResult] | None = None
    for mode in modes:
        one = replace(run, compile_mode=mode)
        res = one.measure([])
        if res.error:
            seen[mode] = {"step_ms": None, "spread_ms": None, "error": res.error}
            print(f"torch.compile mode {mode}: the script fails: {res.error}")
            continue
        ms, spread = res.median(WARMUP)
        seen[mode] = {"step_ms": ms, "spread_ms": spread, "error": ""}
        print(f"torch.compile mode {mode}: step {ms:.3f} ms median (spread {spread:.3f} ms)")
        if best is None or ms < best[0]:
            best = (ms, one, res)
    if best is None:
        return replace(run, baselines=seen), None
    if len(modes) > 1:
        print(f"baseline: mode {best[1].compile_mode}, the faster; every swap is compiled in it too")
    return replace(best[1], baselines=seen), best[2]


def _bound(run: _Script, base: RunResult, bound: float,
           dropins: list[Path]) -> tuple[float, str, list[float | None] | None]:
    """The bound for swapping ``dropins``: the run-to-run yardstick and dtype floor (``bound``), or twice what
    moving the swapped parts' outputs and the gradients their backward returns by up to one ulp changes end to end
    (apply_perturb.py), whichever is larger; and the band of
    the loss (``loss_band``) from the same run, as long as the swap's. In half precision a deep model amplifies
    rounding: a kernel that rounds differently, and no worse, than the original moves the result by about that
    much; the swap's own verdict (against float64) is where its accuracy is checked, this run only that the model
    still computes the same thing."""
    paths = list(dict.fromkeys(p for d in dropins for p in swap_paths(d)))
    res = measure(run.path, run.argv, steps=run.steps, warmup=WARMUP, dropins=[], compile_root=run.compile_root,
                  perturb=paths, compile_mode=run.compile_mode, perturb_grads=dropins)
    band = loss_band(base, res, run.noise)
    if res.error:
        return bound, f"not measured ({res.error}); bound {bound:.1e}", band
    out = difference(res.output, base.output)
    grad = grad_difference(res.grads, base.grads) or 0.0
    mine = max(bound, 2 * out, 2 * grad)
    widest = max((w for w in band or [] if w is not None), default=None)
    loss = f"; loss band up to {widest:.1e}" if widest is not None else ""
    return mine, f"outputs {out:.1e}, gradients {grad:.1e}; bound {mine:.1e}{loss}", band


def apply_command(args: Any) -> int:
    script = Path(args.script)
    dropins = _approved(args, script)
    run = _Script(script, list(getattr(args, "script_args", None) or []),
                  max(int(getattr(args, "steps", None) or 20), 1), bool(getattr(args, "compile", False)))
    print(f"{len(dropins)} approved kernel(s): " + ", ".join(str(d.parent.parent.name) for d in dropins))
    mode = f"torch.compile of {COMPILED}" if run.compile_root else "eager (the script as it is)"
    print(f"{script}: {run.steps} steps after {WARMUP} warm-up, {mode}")
    first: RunResult | None = None
    if run.compile_root:
        run, first = _best_compile(run, compile_modes(getattr(args, "compile_modes", None)))
    base, bound, noise = _yardstick(run, first)
    run = replace(run, noise=noise)
    first_ms, first_spread = base.median(WARMUP)
    rows: list[Row] = []
    for dropin in dropins:
        b, said, band = _bound(run, base, bound, [dropin])
        print(f"one-ulp sensitivity of {swap_where(swap_paths(dropin))}: {said}")
        res = run.measure([dropin])
        rows.append(Row(swap_label(dropin, res), res, dropin, _verdict(res, base, dropin, b, band), band))
    passed = [r.dropin for r in rows if r.verdict == "ok" and r.dropin is not None]
    together, all_row = _together(run, rows, passed, base, bound, first_ms)
    base_ms, base_spread = _pooled_baseline(run, base, first_ms, first_spread)
    _report(args, run, dropins, rows + ([all_row] if all_row else []), base, base_ms, base_spread)
    if run.compile_root and passed and not any_faster([(r.res, r.verdict) for r in rows], base_ms, base_spread):
        print(COMPILE_NOTE)
    if getattr(args, "write", False):
        _write(args, run, rows, passed, together, all_row, base_ms, base_spread)
    elif passed:
        print("nothing was changed; pass --write to add the install(model) call to your script (shown, then one "
              "commit)")
    return 0 if passed else 1


def _approved(args: Any, script: Path) -> list[Path]:
    """The approved drop-ins extracted from ``script`` (--kernels DIR); a usage error when there are none."""
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
    return dropins


def _yardstick(run: _Script, base: RunResult | None = None) -> tuple[RunResult, float, RunResult | None]:
    """The script as it is (``base``, when it has run already), the bound on the differences (4 x what a second
    seeded run changes, or the dtype floor), and, where that second run differs at all, one more run as it is over
    every step: a script that is not deterministic run to run (atomics in a backward) moves its own loss as much as
    a one-ulp change does, and one sensitivity run alone would make the loss band one sample of that noise. That
    run's first-step outputs and gradients are a second sample for the bound too."""
    base = run.measure([]) if base is None else base
    if base.error:
        raise KernelpilotError(f"{run.path} fails on its own: {base.error}; fix it first.")
    again = run.measure([], steps=1, warmup=0)
    yard_out = difference(again.output, base.output)
    yard_grad = grad_difference(again.grads, base.grads)
    bound = max(4 * yard_out, 4 * (yard_grad or 0.0), _floor(base))
    first_ms, first_spread = base.median(WARMUP)
    print(f"as it is: step {first_ms:.3f} ms median (spread {first_spread:.3f} ms); yardstick (two seeded runs): "
          f"outputs {yard_out:.1e}, gradients {_fmt(yard_grad)}; bound {bound:.1e}")
    if not (yard_out or yard_grad) or base.losses is None:
        return base, bound, None
    noise = run.measure([])
    if noise.error:
        said = f"it failed ({noise.error})"
    else:  # a second sample of the run-to-run difference: the bound takes the larger
        out, grad = difference(noise.output, base.output), grad_difference(noise.grads, base.grads)
        bound = max(bound, 4 * out, 4 * (grad or 0.0))
        said = (f"its loss differs by up to {_fmt(max_gap(noise, base))}, its outputs by {out:.1e}, gradients by "
                f"{_fmt(grad)}; bound {bound:.1e}")
    print(f"two seeded runs as they are differ: one more run as it is over every step, whose loss widens every "
          f"loss band as the one-ulp runs do; {said}")
    return base, bound, None if noise.error else noise


def _together(run: _Script, rows: list[Row], passed: list[Path], base: RunResult, bound: float,
              first_ms: float) -> tuple[list[Path], Row | None]:
    """The passing swaps run together (``disjoint``: those left out are named), and that run's row."""
    together, apart = disjoint(passed, {r.dropin: r.res for r in rows if r.dropin is not None}, first_ms)
    for dropin, other in apart:
        if other is None:
            alone = _result_of(rows, dropin)
            print(f"not combined: {swap_label(dropin, alone)}: alone it did not make the step faster "
                  f"({alone.median(WARMUP)[0] - first_ms:+.3f} ms), so the swaps that gain the most together leave "
                  "it out")
            continue
        print(f"not combined: {swap_label(dropin, _result_of(rows, dropin))} and "
              f"{swap_label(other, _result_of(rows, other))}: one is installed where the other takes modules out "
              f"of the run (the swaps kept gain the most together)")
    if len(together) <= 1:
        return together, None
    all_bound, said, band = _bound(run, base, bound, together)
    print(f"one-ulp sensitivity of the {len(together)} passing swaps together: {said}")
    all_res = run.measure(together)
    return together, Row(f"{len(together)} passing swaps together", all_res, None,
                         _verdict(all_res, base, None, all_bound, band), band)


def _pooled_baseline(run: _Script, base: RunResult, first_ms: float, first_spread: float) -> tuple[float, float]:
    """The script as it is once more after the swaps: its steps pooled with the first run's, and with the extra run
    as it is where ``_yardstick`` made one (``base.step_ms`` keeps the timed steps of every run), so a drift of the
    GPU's clocks and the script's own run-to-run spread are in the baseline's spread."""
    extra = run.noise.step_ms[WARMUP:] if run.noise is not None else []
    runs = "both runs" if not extra else "the three runs as it is"
    closing = run.measure([])
    if closing.error:
        base.step_ms = base.step_ms[WARMUP:] + extra
        return base.median(0) if extra else (first_ms, first_spread)
    end_ms, _ = closing.median(WARMUP)
    print(f"as it is, again after the swaps: step {end_ms:.3f} ms median (drift {end_ms - first_ms:+.3f} ms); "
          f"the baseline below pools {runs}")
    base.step_ms = base.step_ms[WARMUP:] + extra + closing.step_ms[WARMUP:]
    return base.median(0)


def _report(args: Any, run: _Script, dropins: list[Path], rows: list[Row], base: RunResult, base_ms: float,
            base_spread: float) -> None:
    """The table of every run (``kernelpilot.dropin.apply_report``), its notes, and ``--summary FILE``."""
    parts = _parts(run.path, run.argv, run.steps, dropins, run.compile_root)
    records = [record("as it is", base, base, base_ms, base_spread, kind="as it is", verdict="the reference")]
    records += [record(r.label, r.res, base, base_ms, base_spread, kind="swap" if r.dropin else "together",
                       verdict=r.verdict, band=r.band) for r in rows]
    print(HEAD + (f" {'breaks':>6} {'recomp':>6}" if run.compile_root else "") + "  result")
    if run.compile_root:
        print("(part fwd ms and share: not measured under torch.compile, whose graph the timing hooks would break)")
    for rec, row in zip(records, [None, *rows]):
        part = parts.get(str(row.dropin)) if row is not None and row.dropin is not None else None
        print(table_row(rec, base_ms, part, run.compile_root))
    print_notes(records, base_ms, base_spread)
    for row in rows:
        if row.verdict != "ok" and row.dropin is not None:
            print(f"left out: {row.label}: {row.verdict}")
    if getattr(args, "summary", None):
        for rec, row in zip(records[1:], rows):
            rec["dropin"] = row.dropin.parent.parent.name if row.dropin else None
        version = running_version()
        write_summary(Path(args.summary), {
            "script": str(run.path), "script_args": run.argv, "mode": "compile" if run.compile_root else "eager",
            "compile_mode": run.compile_mode if run.compile_root else None,
            "compile_baselines": run.baselines if run.compile_root else None,
            "compiled": COMPILED if run.compile_root else None,
            "steps": run.steps, "warmup": WARMUP, "resolves_ms": base_spread,
            "resolves_pct": 100 * base_spread / base_ms if base_ms else None,
            "commit": version.commit or None, "code_version": version.key}, records)


def _write(args: Any, run: _Script, rows: list[Row], passed: list[Path], together: list[Path],
           all_row: Row | None, base_ms: float, base_spread: float) -> None:
    """--write: the install(model) call for the swaps measured together (``to_write``), shown, then committed."""
    if not passed:
        raise KernelpilotError("no swap passed, so there is nothing to write.")
    results = {r.dropin: r.res for r in rows if r.dropin is not None}
    chosen, notes = to_write(together, results, all_row.verdict if all_row else None, base_ms, base_spread)
    for note in notes:
        print(note)
    if not chosen:
        raise KernelpilotError("every passing swap made the step slower beyond the spread, so there is nothing "
                               "to write.")
    print("written: " + ", ".join(swap_label(d, results[d]) for d in chosen) + " (what was measured"
          + (" together" if len(chosen) > 1 else "") + ")")
    write_install(run.path, chosen, run.argv, yes=bool(getattr(args, "yes", False)))


def _verdict(res: RunResult, base: RunResult, dropin: Path | None, bound: float,
             band: list[float | None] | None) -> str:
    if res.error:
        return f"the script failed with it: {res.error}"
    keys = [str(dropin)] if dropin is not None else list(res.stats)
    for key in keys:
        stats = res.stats.get(key, {})
        if not stats.get("kernel") and not stats.get("compiled_kernel"):  # eager calls, or traced into the graph
            where = ", ".join("model." + p for p in res.swapped.get(key, [])) or "its module"
            return (f"no call of {where} matched the recorded shapes and dtypes ({stats.get('original', 0)} call(s) "
                    f"ran the original forward); extract it again from this run")
    out = difference(res.output, base.output)
    grad = grad_difference(res.grads, base.grads)
    if out > bound:
        return f"outputs differ: {out:.1e} > {bound:.1e}"
    if grad is not None and grad > bound:
        return f"gradients differ: {grad:.1e} > {bound:.1e}"
    judged, _, why = judge_loss(res, base, band)
    return why if judged == "outside" else "ok"


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


def _result_of(rows: list[Row], dropin: Path) -> RunResult:
    return next(r.res for r in rows if r.dropin == dropin)


def _mid(values: list[float] | None) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"
