"""`kernelpilot apply SCRIPT [--kernels DIR] [--steps N] [--write]`: approved kernels, swapped into the
script's model, measured end to end.

Runs (each the script's first ``warmup + steps`` steps, seeded alike): the script as it is; the same
once more with another seed-identical run, whose difference from the first is the *yardstick*; one run
per approved kernel swapped in alone; one run with every kernel that passed. Reported per run: the
median step time and its spread (10th to 90th percentile), the change against the script as it is,
the swapped modules' forward time per step (and their share of the step), and the worst normalized
difference of the first step's output and of the gradients at the first optimizer step against the
unmodified run. A swap passes when it ran the kernel, the script did not fail and both differences
are within ``max(4 x yardstick, floor, 2 x sensitivity)`` (floor: 1e-5 for float32 results, 1e-2 for half
types; sensitivity: the difference one more run makes with the swapped modules' outputs moved by up to one
ulp, ``_bound``).
Nothing in your files changes unless ``--write`` (``kernelpilot.dropin.apply_write``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelpilot.dropin.apply_run import RunResult, difference, grad_difference, measure
from kernelpilot.errors import KernelpilotError

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
    what = "chain " + str(origin.get("chain")) + " in " if origin.get("kind") == "chain" else ""
    return what + _where(result.swapped.get(str(dropin)) or [])


def apply_command(args: Any) -> int:
    script = Path(args.script)
    if not script.is_file():
        raise KernelpilotError(f"{script} does not exist; pass the training or inference script the kernels came from.")
    kernels = Path(getattr(args, "kernels", None) or "problems")
    dropins = find_dropins(kernels, script)
    if not dropins:
        raise KernelpilotError(f"no approved kernel extracted from {script.name} under {kernels}/ (looked for "
                               f"*/candidate/dropin.py, written on approval); pass --kernels DIR.")
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
    base_ms, base_spread = base.median(WARMUP)
    print(f"as it is: step {base_ms:.3f} ms median (spread {base_spread:.3f} ms); yardstick (two seeded runs): "
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
    header = (f"{'swap':<44} {'step ms':>9} {'spread':>7} {'change':>15} {'part fwd ms':>19} {'share':>6} "
              f"{'outputs':>8} {'grads':>8}  result")
    print(header)
    if compile_root:
        print("(part fwd ms and share: not measured under torch.compile, whose graph the timing hooks would break)")
    base_parts = _base_parts(script, argv, steps, dropins, compile_root)
    for label, res, dropin, verdict in rows:
        print(_row(label, res, base, base_ms, base_parts.get(str(dropin)), verdict, dropin))
    if len(passed) > 1:
        all_bound, said = _bound(script, argv, base, bound, passed, compile_root)
        print(f"one-ulp sensitivity of all {len(passed)} passing swaps: {said}")
        all_res = measure(script, argv, steps=steps, warmup=WARMUP, dropins=passed, compile_root=compile_root)
        print(_row(f"all {len(passed)} passing swaps", all_res, base, base_ms, None,
                   _verdict(all_res, base, None, all_bound), None))
    failed = [r for r in rows if r[3] != "ok"]
    for label, _, _, verdict in failed:
        print(f"left out: {label}: {verdict}")
    if getattr(args, "write", False):
        from kernelpilot.dropin.apply_write import write_install

        if not passed:
            raise KernelpilotError("no swap passed, so there is nothing to write.")
        write_install(script, passed, argv, yes=bool(getattr(args, "yes", False)))
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


def _base_parts(script: Path, argv: list[str], steps: int, dropins: list[Path], compile_root: bool) -> dict[str, float]:
    """Forward ms per step of each swapped module in the unmodified model (timed, nothing swapped); none
    under torch.compile, where the parts are not timed (``kernelpilot.dropin.apply_run``)."""
    if compile_root:
        return {}
    res = measure(script, argv, steps=steps, warmup=WARMUP, dropins=dropins, compile_root=compile_root, swap=False)
    return {k: sorted(v)[len(v) // 2] for k, v in res.part_ms.items() if v}


def _row(label: str, res: RunResult, base: RunResult, base_ms: float, before_ms: float | None, verdict: str,
         dropin: Path | None) -> str:
    if res.error or not res.step_ms:
        return f"{label:<44} {'-':>9} {'-':>7} {'-':>15} {'-':>19} {'-':>6} {'-':>8} {'-':>8}  {verdict}"
    ms, spread = res.median(WARMUP)
    change = f"{ms - base_ms:+.3f} ({100 * (ms - base_ms) / base_ms:+.1f}%)" if base_ms else "-"
    part = "-"
    share = "-"
    if dropin is not None and res.part_ms.get(str(dropin)):
        after = sorted(res.part_ms[str(dropin)])[len(res.part_ms[str(dropin)]) // 2]
        part = f"{before_ms:.3f} -> {after:.3f}" if before_ms is not None else f"{after:.3f}"
        if before_ms is not None and base_ms:
            share = f"{100 * before_ms / base_ms:.1f}%"
    out = difference(res.output, base.output)
    grad = grad_difference(res.grads, base.grads)
    return (f"{label:<44} {ms:9.3f} {spread:7.3f} {change:>15} {part:>19} {share:>6} {out:8.1e} {_fmt(grad):>8}  "
            f"{verdict}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"
