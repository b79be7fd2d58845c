"""`kernelpilot hotspots --group module|fusion`: the traced step grouped by module or by fusable chain.

The script runs twice: once as it is, for the uninstrumented step time (the median over the steps
after the first), then under the trace (``kernelpilot.profiling.trace``). Times are GPU time (CUDA
events per ATen call) on the GPU, the host clock on the CPU, which the table says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.compile_check import CPU_UNKNOWN, check_chains
from kernelpilot.profiling.extract_graph import (Extracted, chain_problem, module_problem, problem_source,
                                                 write_extracted)
from kernelpilot.profiling.fusion import find_chains, fusion_table
from kernelpilot.profiling.head_loss import find_head_losses
from kernelpilot.profiling.module_table import module_groups, module_table, outside_modules
from kernelpilot.profiling.script_run import median_step_ms
from kernelpilot.profiling.trace import record_script


def grouped_command(args: Any) -> int:
    script = Path(args.script)
    argv = list(getattr(args, "script_args", None) or [])
    steps = max(int(getattr(args, "steps", None) or 3), 2)
    group = args.group
    step_ms, spread = median_step_ms(script, argv, steps)
    trace, run = record_script(script, argv, steps)
    for note in run.notes():
        print(f"note: {note}")
    clock = "GPU time" if trace.device == "cuda" else "host clock (CPU run)"
    recorded = sorted({o.step for o in trace.ops if o.step >= 0})
    measured = recorded[1:] or recorded  # the first step warms up
    if not measured:
        raise KernelpilotError(f"{script} ran no steps of its model; check that it calls the model.")
    top = getattr(args, "top", None) or 15
    extract = getattr(args, "extract", None)
    print(f"step: {step_ms:.3f} ms median uninstrumented (spread {spread:.3f} ms, {steps} steps); recorded "
          f"{len(measured)} step(s)")
    weights = _weights(run.root) if getattr(args, "weights", False) else None
    ex: Extracted | None = None
    if group == "module":
        groups = module_groups(trace, depth=getattr(args, "depth", None) or 3, steps=measured)
        if not groups:
            raise KernelpilotError(f"{script}'s model has no modules at depth {args.depth}; pass a larger --depth.")
        print(module_table(groups, steps=len(measured), step_ms=step_ms, clock=clock, top=top))
        if outside := outside_modules(trace, steps=measured, step_ms=step_ms):
            print(outside)
        if extract is not None:
            extract = _pick(extract, [f"{g.label()} ({g.cls})" for g in groups])
            ex = module_problem(trace, groups[extract - 1], groups, script=str(script))
    else:
        heads = {id(h.chain): h for h in find_head_losses(trace, measured[-1])}
        chains = sorted([*find_chains(trace, measured[-1]), *(h.chain for h in heads.values())],
                        key=lambda c: c.ms, reverse=True)
        if not chains:
            raise KernelpilotError(f"{script}'s step has no chains of pointwise/reduction calls to fuse.")
        shown = chains[:top]
        sources = [(c, problem_source(chain_problem(trace, c, script=str(script), head=heads.get(id(c))),
                                      weights=False)) for c in shown]
        if trace.device == "cuda" or getattr(args, "compile_check", False):
            check_chains(sources, "cuda" if trace.device == "cuda" else "cpu")
        else:
            print(f"note: compiled: {CPU_UNKNOWN}")
            for c in shown:
                c.compiled = "unknown (CPU run)"
        print(fusion_table(chains, step_ms=step_ms, clock=clock, top=top))
        if extract is not None:
            extract = _pick(extract, [f"{c.kind()} model.{c.holder}: {c.label()}" for c in chains])
            chosen = chains[extract - 1]
            ex = chain_problem(trace, chosen, script=str(script), head=heads.get(id(chosen)))
    if ex is not None:
        assert extract is not None
        ex.origin["step_ms"] = step_ms
        directory = write_extracted(ex, Path(getattr(args, "out", None) or "problems"), extract, weights=weights)
        print(f"wrote {directory}/problem.py (checked: it loads and runs): run `kernelpilot {directory}` to pair on it")
        if ex.origin.get("holder_error"):
            print("note: `kernelpilot apply` cannot swap an approved kernel of it into the model: "
                  f"{ex.origin['holder_error']}")
    return 0


def _pick(extract: int | str, labels: list[str]) -> int:
    """The 1-based row: ``extract`` itself, or the first row whose label contains it (host-clock
    rankings move between runs; a name does not)."""
    if isinstance(extract, int) or str(extract).isdigit():
        n = int(extract)
        if not 1 <= n <= len(labels):
            raise KernelpilotError(f"--extract {n} is out of range; choose 1 to {len(labels)}.")
        return n
    for i, label in enumerate(labels, 1):
        if str(extract) in label:
            return i
    raise KernelpilotError(f"no row matches --extract {extract!r}; pass a row number or part of a row's module or "
                           "chain.")


def _weights(root: Any) -> dict[str, Any]:
    out = dict(root.named_parameters(remove_duplicate=False))
    out.update(dict(root.named_buffers(remove_duplicate=False)))
    return out
