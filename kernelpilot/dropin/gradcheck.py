"""Check a drop-in operator's outputs and gradients against a float64 reference.

``python -m kernelpilot.dropin.gradcheck DROPIN`` imports the drop-in module, draws the problem's
inputs (``get_inputs()``) and parameters (its ``Model``, with real weights when the problem has
them), runs the operator forward and backward with a random cotangent (GPU when present), and does
the same with the problem's Model in float64 on the same values. Each input's and parameter's
gradient must be within the dtype's bound on ``‖g − g64‖ / ‖g64‖``. Prints one line
``GRADCHECK {"ok": ..., "summary": ..., "errors": {...}}``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

BOUNDS = {"torch.float32": 1e-4, "torch.float64": 1e-10, "torch.float16": 2e-2, "torch.bfloat16": 4e-2}
HEAD_LOGITS_BYTES = 2 << 30  # a head+loss check's float64 logits beyond this: checked on the first tokens only


def _normalized(a: Any, b: Any) -> float:
    import torch

    ref = b.double()
    den = float(torch.linalg.vector_norm(ref)) or 1.0
    return float(torch.linalg.vector_norm(a.double() - ref)) / den


def check(dropin: Path) -> dict[str, Any]:
    import torch

    spec = importlib.util.spec_from_file_location("kp_dropin_check", dropin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.GRADIENT_CHECK = "checking"  # let the backward run for the check
    problem = module._problem
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    params = [getattr(model, name).detach() for name in module.PARAMS]
    head = _head_slice(getattr(module, "ORIGIN", {}), inputs, params)
    if head is not None:
        inputs, reference, sliced = head
    paths = [("", module.op)] + ([("eager path: ", module.call)] if hasattr(module, "call") else [])
    runs = []
    cotangents: list[Any] = []
    for label, fn in paths:  # the operator, and the direct path `install` uses in eager: each checked
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in [*inputs, *params]]
        out = fn(*leaves)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        cotangents = cotangents or [torch.randn_like(o) for o in outs]
        torch.autograd.backward([o for o in outs], cotangents)
        runs.append((label, outs, leaves))

    ref_leaves = [t.detach().double().requires_grad_() if t.is_floating_point() else t for t in [*inputs, *params]]
    names = [f"input {i}" for i in range(len(inputs))] + [f"parameter {n}" for n in module.PARAMS]
    if head is not None:  # the chain's own formula: the problem's recorded views hold the full token count
        ref_out = reference(*ref_leaves)
    else:
        ref_model = problem.Model(*problem.get_init_inputs()).to(device).double()
        ref_params = dict(zip(module.PARAMS, ref_leaves[len(inputs):]))
        ref_out = torch.func.functional_call(ref_model, ref_params, tuple(ref_leaves[: len(inputs)]), strict=False)
    ref_outs = ref_out if isinstance(ref_out, (tuple, list)) else (ref_out,)
    torch.autograd.backward(list(ref_outs), [c.double() for c in cotangents])
    errors: dict[str, float] = {}
    failures = []
    for label, outs, leaves in runs:
        for i, (o, r) in enumerate(zip(outs, ref_outs)):
            key = f"{label}output {i}"
            errors[key] = _normalized(o.detach(), r.detach())
            if errors[key] > BOUNDS.get(str(o.dtype), 1e-4):
                failures.append(key)
        for name, leaf, ref in zip(names, leaves, ref_leaves):
            if not leaf.is_floating_point():
                continue
            key = label + name
            if leaf.grad is None or ref.grad is None:
                if (leaf.grad is None) != (ref.grad is None):
                    failures.append(f"{key} (gradient {'missing' if leaf.grad is None else 'unexpected'})")
                continue
            errors[key] = _normalized(leaf.grad, ref.grad)
            if errors[key] > BOUNDS.get(str(leaf.dtype), 1e-4):
                failures.append(key)
    worst = max(errors.values(), default=0.0)
    grads = sum(1 for k in errors if not k.startswith(("output", "eager")))
    if head is not None:
        device = f"{device}, {sliced}"
    summary = (f"passed on {device}: outputs and {grads} "
               f"gradients{' (operator and eager path)' if len(runs) > 1 else ''}, worst normalized error {worst:.2e} "
               "against float64" if not failures else
               f"failed on {device} for {', '.join(failures)} (worst normalized error {worst:.2e})")
    return {"ok": not failures, "summary": summary, "errors": errors}


def _head_slice(origin: dict[str, Any], inputs: list[Any], params: list[Any]) -> Any:
    """For a head+loss problem whose float64 logits would pass HEAD_LOGITS_BYTES (16k tokens x 128k vocabulary:
    16 GiB, three times over with the log-probabilities and the gradient): the first tokens that fit, and the
    chain's float64 reference on them (cross-entropy of the upcast logits, with the recorded ignore index and
    reduction). None: check the whole problem."""
    import torch.nn.functional as F

    if origin.get("role") != "head+loss" or len(inputs) != 2 or len(params) != 1:
        return None
    hidden, labels = inputs
    tokens, classes = labels.numel(), int(origin["classes"])
    if tokens * classes * 8 <= HEAD_LOGITS_BYTES:
        return None
    rows = max(1, HEAD_LOGITS_BYTES // (classes * 8))
    width = hidden.shape[-1]
    ignore, reduction = int(origin["ignore_index"]), str(origin["reduction"])

    def reference(h: Any, y: Any, w: Any) -> Any:
        return F.cross_entropy(h.reshape(-1, width) @ w.t(), y, ignore_index=ignore, reduction=reduction)

    sliced = hidden.reshape(-1, width)[:rows].reshape(1, rows, width).contiguous()
    return [sliced, labels.reshape(-1)[:rows].contiguous()], reference, f"on the first {rows} of {tokens} tokens"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    result = check(Path(args[0]))
    print("GRADCHECK " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
