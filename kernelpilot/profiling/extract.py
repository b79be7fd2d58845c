"""Write one recorded hotspot as a KernelBench problem file (Model, get_inputs, get_init_inputs).

Every tensor argument becomes a forward input drawn with the recorded shape and dtype (integer
tensors within the observed range, so indices stay valid); every other argument is written as a
literal. The forward calls the same ATen overload the script called, so the reference is exactly
what ran — shapes, dtypes and all.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.program import tensor_maker as _maker  # one way to write a recorded tensor
from kernelpilot.profiling.records import Hotspot, TensorArg


def _literal(v: Any, names: list[str], specs: list[TensorArg]) -> str:
    if isinstance(v, TensorArg):
        names.append(f"x{len(names)}")
        specs.append(v)
        return names[-1]
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x, names, specs) for x in v) + "]"
    if isinstance(v, str) and v.startswith("<") and v.endswith(">"):
        raise KernelpilotError(f"cannot extract an argument of type {v[1:-1]}; pick another hotspot.")
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return f"float({str(v)!r})"
    return repr(v)  # ints, floats, bools, None, strings, torch.dtype / device reprs are valid Python


def problem_source(entry: Hotspot, *, script: str, share_pct: float) -> str:
    names: list[str] = []
    specs: list[TensorArg] = []
    args = [_literal(a, names, specs) for a in entry.args]
    kwargs = [f"{k}={_literal(v, names, specs)}" for k, v in entry.kwargs.items()]
    namespace, op = entry.op.split("::", 1)
    call = f"torch.ops.{namespace}.{op}.{entry.overload}({', '.join(args + kwargs)})"
    makers = "\n".join(f"    {n} = {_maker(s)}" for n, s in zip(names, specs))
    today = _dt.date.today().isoformat()
    return (f'''"""{entry.op} as `{script}` ran it: {entry.calls} call(s), {entry.total_ms:.3f} ms in all, '''
            f'''{share_pct:.1f}% of recorded time.

Extracted by `kernelpilot hotspots` on {today}. Signature: {entry.signature()}
Inputs are drawn fresh with the recorded shapes and dtypes; strides are not kept (inputs are contiguous).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self{"".join(", " + n for n in names)}):
        return {call}


def get_inputs():
{makers if makers else "    pass"}
    return [{", ".join(names)}]


def get_init_inputs():
    return []
''')


def slug(entry: Hotspot) -> str:
    return re.sub(r"[^a-z0-9]+", "_", entry.op.split("::")[-1].lower()).strip("_") or "op"


def write_problem(entry: Hotspot, out_dir: Path, *, script: str, share_pct: float, rank: int) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{rank}_{slug(entry)}.py"
    if path.exists():
        raise KernelpilotError(f"{path} already exists; remove it or choose another --out directory.")
    path.write_text(problem_source(entry, script=script, share_pct=share_pct))
    return path
