"""Write the drop-in operator beside an approved candidate of an extracted problem.

An extracted problem directory (``origin.json`` beside ``problem.py``, written by
``kernelpilot hotspots --extract``) whose candidate is approved gets, in the candidate directory:
``dropin.py`` (a ``torch.library.custom_op``, or ``triton_op`` for a Triton candidate, with a fake
implementation and a backward; see ``kernelpilot.dropin.template``), ``dropin_swap.py`` (``install``,
a copy of ``kernelpilot.dropin.swap``) and a ``.gitignore`` for the extension's ``_build/``. The
backward is the reference's own (``torch.func.vjp`` of the problem's Model); the gradients of the
inputs and parameters through the operator are checked against a float64 reference in a fresh
process (``kernelpilot.dropin.gradcheck``), and the result is written into ``dropin.py``: a failed
or impossible check leaves a backward that stops with the reason.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.dropin.template import CUSTOM_OP, TEMPLATE, TRITON_OP
from kernelpilot.errors import KernelpilotError
from kernelpilot.extracted import (  # noqa: F401  (the file names re-exported)
    DROPIN_FILE,
    ORIGIN_FILE,
    SWAP_FILE,
    modelnew_has_backward,
    problem_dir_of,
)


@dataclass
class Registration:
    files: list[Path]
    op: str
    gradient: str  # what the check said
    training: bool


def _model_file(candidate_dir: Path) -> Path:
    own = candidate_dir / "model_new.py"
    if own.is_file():
        return own
    files = [p for p in candidate_dir.glob("*.py") if p.name not in (DROPIN_FILE, SWAP_FILE)]
    if len(files) != 1:
        raise KernelpilotError(f"{candidate_dir} has no model_new.py and not exactly one .py file; cannot write its "
                               "drop-in.")
    return files[0]


def _forward_shape(problem: Path) -> tuple[list[str], int]:
    """(forward argument names, number of returned tensors) of the problem's Model."""
    tree = ast.parse(problem.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    names = [a.arg for a in item.args.args[1:]]
                    returns = [n for n in ast.walk(item) if isinstance(n, ast.Return) and n.value is not None]
                    value = returns[-1].value if returns else None
                    return names, len(value.elts) if isinstance(value, ast.Tuple) else 1
    raise KernelpilotError(f"{problem} has no Model.forward; it is not an extracted problem.")


def _has_own_backward(model_file: Path) -> bool:
    """Whether the candidate's ``ModelNew`` defines ``backward(self, grads, *inputs)``: the drop-in then uses it
    (checked against float64 like any backward) instead of recomputing the reference under torch.func.vjp."""
    return modelnew_has_backward(ast.parse(model_file.read_text()))


def op_name(problem_dir: Path) -> str:
    return "kernelpilot::" + re.sub(r"\W", "_", "p_" + problem_dir.name)


def dropin_source(candidate_dir: Path, problem_dir: Path, *, candidate_id: str, gradient: str | None,
                  refusal: str) -> str:
    origin = json.loads((problem_dir / ORIGIN_FILE).read_text())
    inputs, outputs = _forward_shape(problem_dir / "problem.py")
    params = list(origin.get("params", {}))
    model_file = _model_file(candidate_dir)
    triton = any("import triton" in p.read_text() or "from triton" in p.read_text() for p in candidate_dir.glob("*.py")
                 if p.name not in (DROPIN_FILE, SWAP_FILE))
    names = inputs + params
    signature = ", ".join(f"{n}: torch.Tensor" for n in names)
    returns = "torch.Tensor" if outputs == 1 else "tuple[" + ", ".join(["torch.Tensor"] * outputs) + "]"
    own = _has_own_backward(model_file)
    # a candidate's own backward may read what its forward kept (a chunked head+loss keeps its gradients): a
    # triton_op's forward is traced by torch.compile on fake tensors, not run, so it would keep nothing real (on an
    # H100, 2026-12-07: "RuntimeError when making fake tensor call" at its data_ptr()); such an operator is opaque
    traced = triton and not own
    definition = (TRITON_OP if traced else CUSTOM_OP).replace("@@SIGNATURE@@", signature).replace(
        "@@RETURNS@@", returns).replace("@@ARGS@@", ", ".join(names))
    where = f"model.{origin['path']}" if origin.get("path") else "model"
    if origin.get("kind") == "chain":
        where = f"the chain {origin.get('chain', '')} in {where}"
    rel = os.path.relpath(problem_dir / "problem.py", candidate_dir)
    how = ("the candidate's own (ModelNew.backward, as an opaque operator of its own)" if own else
           "the reference's own (torch.func.vjp of the problem's Model, as an opaque operator of its own)")
    backward = f"{how}, checked against float64: {gradient}." if gradient is not None else f"none: {refusal}"
    values = {
        "WHERE": where, "PROBLEM_REL": rel, "OP": op_name(problem_dir), "CANDIDATE": candidate_id,
        "TRITON_NOTE": " and triton" if triton else "",
        "KIND_NOTE": ("torch.library.triton_op, its Triton kernels wrapped with wrap_triton "
                      "(KERNELPILOT_DROPIN_OPAQUE=1, or Triton's interpreter, makes it an opaque custom_op)")
                     if traced else
                     ("an opaque torch.library.custom_op, not a triton_op: its own backward may read what\n  its "
                      "forward kept, and torch.compile would trace that forward on fake tensors instead of running it")
                     if triton else
                     "an opaque torch.library.custom_op",
        "BACKWARD_NOTE": backward, "PROBLEM_FROM_HERE": repr(rel), "INPUTS": str(len(inputs)), "PARAMS": repr(params),
        "OUTPUTS": str(outputs), "TRITON": str(triton), "OWN_BACKWARD": str(own), "GRADIENT_CHECK": repr(gradient),
        "REFUSAL": repr(refusal),
        "MODEL_FILE": repr(model_file.name), "OP_DEFINITION": definition,
    }
    text = TEMPLATE
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    return text


def write_registration(candidate_dir: Path, *, candidate_id: str, check: bool = True,
                       timeout: float = 600) -> Registration:
    """Write dropin.py, dropin_swap.py and .gitignore into ``candidate_dir``; check the gradients."""
    problem_dir = problem_dir_of(candidate_dir)
    if problem_dir is None:
        raise KernelpilotError(f"{candidate_dir} is not the candidate of an extracted problem (no ../origin.json).")
    origin = json.loads((problem_dir / ORIGIN_FILE).read_text())
    swap = Path(__file__).with_name("swap.py").read_text()
    (candidate_dir / SWAP_FILE).write_text(swap)
    (candidate_dir / ".gitignore").write_text("_build/\n__pycache__/\n")
    dropin = candidate_dir / DROPIN_FILE
    pending = "the gradient check has not run yet"
    dropin.write_text(dropin_source(candidate_dir, problem_dir, candidate_id=candidate_id, gradient=None,
                                    refusal=pending))
    gradient: str | None = None
    if check:
        ok, said = run_gradcheck(dropin, timeout=timeout)
        gradient = said if ok else None
        refusal = (f"this operator's gradients did not match the float64 reference when it was approved ({said}); "
                   f"use it under torch.no_grad() / inference only, or approve a candidate whose check passes")
    else:
        refusal = "no gradient check was run when it was approved; use it for inference only (torch.no_grad())"
    if not origin.get("autograd", True) and gradient is not None:
        gradient += " (the script ran it without autograd)"
    dropin.write_text(dropin_source(candidate_dir, problem_dir, candidate_id=candidate_id, gradient=gradient,
                                    refusal=refusal))
    return Registration([dropin, candidate_dir / SWAP_FILE, candidate_dir / ".gitignore"], op_name(problem_dir),
                        gradient if gradient is not None else refusal, gradient is not None)


def run_gradcheck(dropin: Path, *, timeout: float = 600) -> tuple[bool, str]:
    try:
        res = subprocess.run([sys.executable, "-m", "kernelpilot.dropin.gradcheck", str(dropin)], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"the check took over {timeout:.0f} s"
    line = next((x for x in res.stdout.splitlines() if x.startswith("GRADCHECK ")), None)
    if line is None:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"the check failed to run: {tail}"
    result = json.loads(line[len("GRADCHECK "):])
    return bool(result["ok"]), str(result["summary"])
