"""Write a module or a fused chain of a traced script as a KernelBench problem directory.

``<out>/<rank>_<name>/`` gets:

- ``problem.py``: ``Model`` whose forward is the recorded ATen calls (``kernelpilot.profiling.program``),
  the module's (or chain's) parameters and buffers as attributes with their shapes, ``get_inputs()``
  with the recorded shapes and dtypes, ``get_init_inputs()``; a result of several tensors is a tuple;
- ``weights.pt`` with ``--weights``: the parameters' real values (``torch.load(weights_only=True)``);
- ``kernelpilot.toml`` when the same computation ran with other shapes: ``extra_shapes`` (this file
  is the nearest config for the problem, so it also names the project's keys to copy in);
- ``origin.json``: where it came from (script, module path, class, argument names, the structure of
  the result, parameter names under the model, whether it ran under autograd) for the drop-in
  registration and ``kernelpilot apply``; for a chain also ``holder.py``: the forward of the module
  holding the chain with the chain replaced by a call of the kernel.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.extracted import ORIGIN_FILE
from kernelpilot.profiling import holder_calls
from kernelpilot.profiling.fusion import Chain
from kernelpilot.profiling.head_loss import HEAD_NOTE, HeadLoss, head_origin, labels_maker, script_loss_origin
from kernelpilot.profiling.module_table import ModuleGroup
from kernelpilot.profiling.program import Program, full_name, param_maker, tensor_maker
from kernelpilot.profiling.records import ModuleCall, vids_in
from kernelpilot.profiling.trace import Trace

HOLDER_FILE = "holder.py"
WEIGHTS_FILE = "weights.pt"


@dataclass
class Extracted:
    name: str
    doc: str
    program: Program
    body: list[str]
    origin: dict[str, Any]
    extra_shapes: list[list[list[int]]] = field(default_factory=list)
    holder_source: str = ""
    makers: dict[int, str] = field(default_factory=dict)  # forward input -> how get_inputs draws it, if not by spec


def _forward_ops(trace: Trace, call: ModuleCall) -> list[Any]:
    return [trace.ops[i] for i in range(call.first_op, call.last_op) if trace.ops[i].phase == "forward"]


def _structure_json(structure: Any, index: dict[int, int]) -> Any:
    if isinstance(structure, int):
        return {"out": index[structure]}
    kind, items = structure
    if kind == "lit":
        return {"lit": items}
    if kind == "dict":
        return {"dict": {k: _structure_json(v, index) for k, v in items.items()}}
    return {kind: [_structure_json(v, index) for v in items]}


def module_problem(trace: Trace, group: ModuleGroup, all_groups: list[ModuleGroup], *, script: str) -> Extracted:
    call = group.calls[-1]
    ops = _forward_ops(trace, call)
    outputs = list(dict.fromkeys(vids_in(call.output)))
    if not outputs:
        raise KernelpilotError(f"model.{call.path} ({call.cls}) returns no tensor; pick another module.")
    program = Program(trace, ops, [r.vid for _, r in call.inputs], outputs, scope=call.path)
    body = program.render()
    external_note = ""
    if program.externals:
        external_note = (f"\nIt reads {len(program.externals)} tensor(s) that are neither its arguments nor its "
                         f"parameters (forward inputs e0..); `kernelpilot apply` cannot swap it in.")
    if call.objects:
        external_note += (f"\nIt is called with {_objects(call)}, which its recorded forward neither reads nor "
                          f"updates; `kernelpilot apply` cannot swap it in{_objects_hint(call)}.")
    extra: list[list[list[int]]] = []
    for other in all_groups:
        if other is group or other.cls != group.cls or other.param_signature != group.param_signature:
            continue
        alt_call = other.calls[-1]
        alt = Program(trace, _forward_ops(trace, alt_call), [r.vid for _, r in alt_call.inputs],
                      list(dict.fromkeys(vids_in(alt_call.output))), scope=alt_call.path)
        if alt.render() == body and len(alt.externals) == len(program.externals):
            extra.append([list(r.spec.shape) for _, r in alt_call.inputs] + [list(r.spec.shape) for r in alt.externals])
    index = {vid: i for i, vid in enumerate(outputs)}
    origin = {
        "kind": "module", "script": script, "path": call.path, "paths": group.paths, "class": call.cls,
        "arguments": [k for k, _ in call.inputs], "literals": call.literals, "aliases": _aliases(call),
        "shapes": [[list(r.spec.shape) for _, r in call.inputs]] + [s[: len(call.inputs)] for s in extra],
        "dtypes": [r.spec.dtype for _, r in call.inputs],
        "output": _structure_json(call.output, index), "output_class": call.output_class,
        "params": program.param_names,
        "buffers": [a for a, n in program.param_names.items() if _is_buffer(trace, full_name(program.scope, n))],
        "externals": len(program.externals), "autograd": call.grad and _has_backward(trace, call.path),
        **({"objects": dict(call.objects)} if call.objects else {}),
    }
    where = f"model.{call.path}" if call.path else "model"
    merged = f", and {group.count - 1} more of its kind ({group.label()})" if group.count > 1 else ""
    doc = (f"{where} ({call.cls}) as `{script}` ran it{merged}: its forward's ATen calls, in order, with the recorded\n"
           f"shapes and dtypes [{call.signature()}].{external_note}")
    return Extracted(re.sub(r"[^a-z0-9]+", "_", call.cls.lower()).strip("_") or "module", doc, program, body, origin,
                     extra)


def chain_problem(trace: Trace, chain: Chain, *, script: str, head: HeadLoss | None = None) -> Extracted:
    # outputs: the result and the intermediates later calls read; those autograd only saves for backward are
    # not: the drop-in's backward (the candidate's own, or the reference's through vjp) needs none of them
    saved_only = {e.vid for e in chain.escapes if e.by == "saved for backward"}
    program = Program(trace, chain.ops, [v for v in chain.inputs if v not in trace.params],
                      [v for v in chain.outputs if v not in saved_only], scope=chain.holder)
    body = program.render()
    extra: list[list[list[int]]] = []
    holder_call = _holder_call(trace, chain)
    origin: dict[str, Any] = {
        "kind": "chain", "script": script, "path": chain.holder, "class": holder_call.cls if holder_call else "",
        **_chain_paths(trace, chain, holder_call.cls if holder_call else ""),
        "chain": chain.label(), "ops": [f"{o.name}.{o.overload}" for o in chain.compute_ops()],
        "params": program.param_names,
        "buffers": [a for a, n in program.param_names.items() if _is_buffer(trace, full_name(program.scope, n))],
        "escapes": [e.by for e in chain.escapes],
        "autograd": bool(holder_call and holder_call.grad) and any(op.phase == "backward" for op in trace.ops),
        "unfused_bytes": chain.unfused_bytes, "fused_bytes": chain.fused_bytes, "compiled": chain.compiled,
        "shapes": [[list(_spec_of(trace, chain, v).shape) for v in program.inputs]],
    }
    holder_source = ""
    makers: dict[int, str] = {}
    if head is not None:
        origin.update(head_origin(head))
        makers[program.inputs.index(head.labels)] = labels_maker(_spec_of(trace, chain, head.labels),
                                                                  classes=head.classes, ignore_index=head.ignore_index)
    if head is not None and head.logits_readers:
        origin["holder_error"] = (f"the logits are read outside the chain ({', '.join(head.logits_readers[:3])}): "
                                  "a kernel that never makes them cannot be swapped in")
    elif head is not None and head.where == "script":
        try:
            origin["holder"] = script_loss_origin(trace, head)
            origin["paths"] = [origin["holder"]["path"]]
        except KernelpilotError as exc:
            origin["holder_error"] = str(exc)
    elif holder_call is not None:
        try:
            holder_source, holder_origin = _holder_source(trace, holder_call, chain, program,
                                                          absent=chain.made() - set(program.outputs) if head else set())
            origin["holder"] = holder_origin
        except KernelpilotError as exc:  # the chain is still a problem to pair on; only its swap is impossible
            origin["holder_error"] = str(exc)
    escapes = HEAD_NOTE if head is not None else "".join(f"\n  - an intermediate is {e.by} "
                      + ("(autograd's: a kernel with a backward of its own need not "
                      "write it)" if e.vid in saved_only else "(returned as well)") for e in chain.escapes)
    doc = (f"A chain of {len(chain.compute_ops())} calls in model{'.' + chain.holder if chain.holder else ''} as "
           f"`{script}` ran it ({chain.repeats} time(s) a step): {chain.label()}.\n"
           f"Unfused it moves {chain.unfused_bytes} bytes; one fused kernel must move {chain.fused_bytes}.{escapes}")
    name = "chain_" + "_".join(o.name.split("::")[-1] for o in chain.compute_ops())[:60]
    if head is not None:
        name = "head_loss"
    return Extracted(re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_"), doc, program, body, origin, extra,
                     holder_source, makers)


def _aliases(call: ModuleCall) -> list[list[int]]:
    """Groups of argument positions that were one tensor in the recorded call (``labels=input_ids``): the
    replay reads it by one name, so a swap runs only where they are still one tensor."""
    groups: dict[int, list[int]] = {}
    for i, (_, ref) in enumerate(call.inputs):
        groups.setdefault(ref.vid, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _objects(call: ModuleCall) -> str:
    return ", ".join(f"{k}=<{v}>" for k, v in call.objects.items())


def _objects_hint(call: ModuleCall) -> str:
    """What to do about an object argument we know: a transformers KV cache in a training step."""
    if any("Cache" in v for v in call.objects.values()):
        return " (a KV cache in a training step: call the model with use_cache=False, as training needs no cache)"
    return ""


def _chain_paths(trace: Trace, chain: Chain, cls: str) -> dict[str, list[str]]:
    """Where the chain's kernel can be swapped in: each module holding one of its occurrences, once, when it is
    of the first holder's class (its recorded forward is the one replayed); the other holders, named."""
    paths: list[str] = []
    others: list[str] = []
    for c in [chain, *chain.similar]:
        call = _holder_call(trace, c)
        where = c.holder if call is not None and call.cls == cls else f"{c.holder} ({call.cls if call else '?'})"
        (paths if where == c.holder else others).append(where)
    out = {"paths": list(dict.fromkeys(paths))}
    if others:
        out["other_holders"] = list(dict.fromkeys(others))
    return out


def _spec_of(trace: Trace, chain: Chain, vid: int) -> Any:
    for o in chain.ops:
        for r in o.tensor_inputs():
            if r.vid == vid:
                return r.spec
    raise KernelpilotError(f"value {vid} is not read by the chain")


def _is_buffer(trace: Trace, name: str) -> bool:
    return any(trace.params.get(v) == name for v in trace.buffers)


def _has_backward(trace: Trace, path: str) -> bool:
    prefix = path + "." if path else ""
    return any(o.phase == "backward" and o.stack and (o.stack[-1] == path or o.stack[-1].startswith(prefix))
               for o in trace.ops)


def _holder_call(trace: Trace, chain: Chain) -> ModuleCall | None:
    first = chain.ops[0].index
    for call in trace.calls:
        if call.path == chain.holder and call.first_op <= first < call.last_op:
            return call
    return None


def _holder_source(trace: Trace, call: ModuleCall, chain: Chain, chain_program: Program,
                   absent: set[int]) -> tuple[str, dict[str, Any]]:
    """The holder's forward with the chain's calls replaced by ``kernel(...)`` at its last call; the values in
    ``absent`` (a head's logits, which the kernel never makes) are returned as None."""
    if call.objects:
        raise KernelpilotError(f"model.{call.path} is called with {_objects(call)}: its recorded forward would neither "
                               f"read nor update it; the chain cannot be swapped into it{_objects_hint(call)}.")
    members = {o.index for o in chain.ops}
    placeholder = "__KERNEL_ARGS__"
    forced: set[str] = set()
    while True:  # the children it calls as modules (holder_calls), less each one whose arguments it cannot name
        calls = holder_calls.plan(trace, call, members, forced)
        ops = [o for o in _forward_ops(trace, call)
               if (o.index not in members or o.index == chain.ops[-1].index) and o.index not in calls.skip]
        holder = Program(trace, ops, [r.vid for _, r in call.inputs], list(dict.fromkeys(vids_in(call.output))),
                         scope=call.path, absent=absent)
        try:
            holder_lines = holder.render(self_name="P", replace={
                **calls.replace, chain.ops[-1].index: (chain_program.outputs, f"kernel({placeholder})")})
            break
        except holder_calls.Unnamed as exc:
            forced.add(exc.path)
    # the kernel's arguments: the chain's inputs (as the holder names them), then its parameters
    if holder.externals:
        raise KernelpilotError(f"model.{call.path} reads tensors that are neither its arguments nor its parameters "
                               f"({'; '.join(holder.external_readers[:3])}); the chain cannot be swapped into it.")
    try:
        names = [holder.names.get(v) or holder.value(v, "P") for v in chain_program.inputs]
    except KeyError:
        raise KernelpilotError(f"the chain reads a tensor that model.{call.path or '<root>'} neither receives, holds "
                               f"nor makes (a global or a closure); the chain cannot be swapped into it.") from None
    names += [f"P.{attr}" for attr in chain_program.params]
    holder_lines = [line.replace(placeholder, ", ".join(names)) for line in holder_lines]
    index = {vid: i for i, vid in enumerate(holder.outputs)}
    args = ", ".join(f"x{i}" for i in range(len(call.inputs)))
    source = (f'"""The forward of model.{call.path or "<root>"} ({call.cls}) as recorded, with the chain '
              f'{chain.label()} replaced by `kernel`."""\n\nimport torch\n\n\n'
              f"def forward(P, kernel{', ' + args if args else ''}):\n"
              + "".join(f"    {line}\n" for line in holder_lines) + f"    return {holder.returns()}\n"
              + (holder_calls.TENSORS_HELPER if calls.modules else ""))
    origin = {"path": call.path, "class": call.cls, "arguments": [k for k, _ in call.inputs], "literals": call.literals,
              "aliases": _aliases(call),
              "shapes": [[list(r.spec.shape) for _, r in call.inputs]],
              "dtypes": [r.spec.dtype for _, r in call.inputs],
              "output": _structure_json(call.output, index), "output_class": call.output_class,
              "params": {**holder.param_names, **chain_program.param_names},  # the kernel's are passed as P.<attr>
              "modules": calls.modules, "inlined": calls.inlined}
    return source, origin


def problem_source(ex: Extracted, *, weights: bool) -> str:
    p = ex.program
    inputs = [f"x{i}" for i in range(len(p.inputs))] + [p.names[r.vid] for r in p.externals]
    specs = [_spec_for_input(p, i) for i in range(len(p.inputs))] + [r.spec for r in p.externals]
    init = []
    for attr, ref in p.params.items():
        maker = param_maker(p.param_names[attr], ref.spec)
        if attr in ex.origin.get("buffers", []):
            init.append(f"        self.register_buffer({attr!r}, {maker})")
        else:
            init.append(f"        self.{attr} = nn.Parameter({maker})")
    if weights:
        init.append("        if WEIGHTS.is_file():  # the model's real values (kernelpilot hotspots --weights)")
        init.append("            self.load_state_dict(torch.load(WEIGHTS, weights_only=True))")
    makers = "\n".join(f"    {n} = {ex.makers.get(i) or tensor_maker(s)}"
                       for i, (n, s) in enumerate(zip(inputs, specs)))
    today = _dt.date.today().isoformat()
    return (f'"""{ex.doc}\n\nExtracted by `kernelpilot hotspots` on {today}; origin.json says where from.\n"""\n\n'
            "from pathlib import Path\n\nimport torch\nimport torch.nn as nn\n\n"
            f"WEIGHTS = Path(__file__).with_name({WEIGHTS_FILE!r})\n\n\n"
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + "".join(f"{line}\n" for line in init) +
            f"\n    def forward(self{''.join(', ' + n for n in inputs)}):\n"
            + "".join(f"        {line}\n" for line in ex.body) + f"        return {p.returns()}\n\n\n"
            f"def get_inputs():\n{makers if makers else '    pass'}\n    return [{', '.join(inputs)}]\n\n\n"
            "def get_init_inputs():\n    return []\n")


def _spec_for_input(p: Program, i: int) -> Any:
    vid = p.inputs[i]
    for op in p.ops:
        for r in op.tensor_inputs():
            if r.vid == vid:
                return r.spec
    for attr, ref in p.params.items():
        if ref.vid == vid:
            return ref.spec
    raise KernelpilotError(f"input x{i} of the extracted program is never read; pick another hotspot.")


def write_extracted(ex: Extracted, out_dir: Path, rank: int, *, weights: dict[str, Any] | None = None) -> Path:
    """The problem directory (checked to load and run); refuses to overwrite one."""
    directory = out_dir / f"{rank}_{ex.name}"
    if directory.exists():
        raise KernelpilotError(f"{directory} already exists; remove it or choose another --out directory.")
    directory.mkdir(parents=True)
    (directory / "problem.py").write_text(problem_source(ex, weights=weights is not None))
    if weights is not None:
        import torch

        scope = ex.program.scope
        missing = [n for n in ex.program.param_names.values() if full_name(scope, n) not in weights]
        if missing:
            raise KernelpilotError(f"the model has no values for {', '.join(missing)}; extract without --weights.")
        torch.save({a: weights[full_name(scope, n)].detach().cpu().clone() for a, n in ex.program.param_names.items()},
                   directory / WEIGHTS_FILE)
    if ex.extra_shapes:
        entries = "".join(f'\n[[extra_shapes]]\nname = "recorded_{i + 1}"\ninputs = {json.dumps(s)}\n'
                          for i, s in enumerate(ex.extra_shapes))
        (directory / "kernelpilot.toml").write_text(
            "# The other shapes this computation ran with in the script. This file is the nearest kernelpilot.toml\n"
            "# for the problem, so copy your project's keys (model, tolerances, ...) here too.\n" + entries)
    (directory / ORIGIN_FILE).write_text(json.dumps(ex.origin, indent=2) + "\n")
    if ex.holder_source:
        (directory / HOLDER_FILE).write_text(ex.holder_source)
    check_problem(directory / "problem.py", len(ex.extra_shapes))
    return directory


CHECK = """
import sys, torch
from pathlib import Path
from kernelpilot.config import load_config
from kernelpilot.problem import load_problem, make_inputs
problem = load_problem(Path(sys.argv[1]))
module = problem.load_module()
model = module.Model(*module.get_init_inputs())
sets = [None] + list(load_config(start=Path(sys.argv[1]).parent).extra_shapes)
for shape_set in sets:
    with torch.no_grad():
        out = model(*make_inputs(module, shape_set))
    outs = out if isinstance(out, (tuple, list)) else [out]
    assert all(isinstance(o, torch.Tensor) for o in outs), "forward returned a non-tensor"
print("ran", len(sets))
"""


def check_problem(path: Path, extra: int) -> None:
    """Load the problem as kernelpilot does and run it (CPU) on every shape set, in a fresh process."""
    res = subprocess.run([sys.executable, "-c", CHECK, str(path)], capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    if res.returncode != 0 or f"ran {extra + 1}" not in res.stdout:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise KernelpilotError(f"the extracted problem {path} does not run: {tail}; please report it (the file is "
                               "kept).")
