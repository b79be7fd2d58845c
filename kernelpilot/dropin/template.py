'''The drop-in operator module written beside an approved candidate (``dropin.py``), as source text.

It needs only torch (and triton for a Triton candidate): not kernelpilot. Placeholders in ``@@NAME@@``
form are filled by ``kernelpilot.dropin.registration``.
'''

TEMPLATE = '''"""Drop-in operator for @@WHERE@@: the approved kernel of @@PROBLEM_REL@@ as `torch.ops.@@OP@@`.

Written by kernelpilot when candidate @@CANDIDATE@@ was approved. It needs torch only@@TRITON_NOTE@@, not
kernelpilot: a CUDA candidate's extension is built on the first start into _build/ beside this file
(by torch.utils.cpp_extension, the way kernelpilot builds it) and loaded from there afterwards.

- `torch.ops.@@OP@@(inputs..., parameters...)` runs the kernel: @@KIND_NOTE@@, with a fake
  (meta) implementation that runs the problem's reference on fake tensors, so torch.compile and
  torch.export see one operator and no graph break.
  `call(...)` is what `install` swaps in: `op` under torch.compile / torch.export, the same forward and
  backward called directly (no dispatcher) in eager.
- Backward: @@BACKWARD_NOTE@@
- `install(model)` puts it into your model: kernelpilot apply writes that call for you.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
PROBLEM = (HERE / @@PROBLEM_FROM_HERE@@).resolve()
OP = "@@OP@@"
INPUTS = @@INPUTS@@  # forward inputs of the problem, then its parameters and buffers in PARAMS order
PARAMS = @@PARAMS@@
OUTPUTS = @@OUTPUTS@@
TRITON = @@TRITON@@
OWN_BACKWARD = @@OWN_BACKWARD@@  # the candidate's ModelNew.backward, else the reference's vjp
ORIGIN = json.loads((PROBLEM.parent / "origin.json").read_text()) if (PROBLEM.parent / "origin.json").is_file() else {}
GRADIENT_CHECK = @@GRADIENT_CHECK@@  # None: not checked, training use stops with REFUSAL
REFUSAL = @@REFUSAL@@


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_extension(model_file: str, name: str | None = None, **options: Any) -> Any:
    """Build (once) and load a directory candidate's extension without kernelpilot."""
    from torch.utils.cpp_extension import load

    directory = Path(model_file).resolve().parent
    sources = [str(p) for p in sorted(directory.iterdir()) if p.suffix == ".cu" or p.name == "binding.cpp"]
    build = directory / "_build"
    build.mkdir(exist_ok=True)
    return load(name=name or "kp_" + OP.split("::")[-1], sources=sources, build_directory=str(build),
                extra_cuda_cflags=["-O3", "-std=c++17", *options.get("extra_cuda_cflags", [])],
                extra_cflags=list(options.get("extra_cflags", [])),
                extra_ldflags=list(options.get("extra_ldflags", [])), verbose=False)


def _candidate() -> types.ModuleType:
    shim = types.ModuleType("kernelpilot.extension")
    shim.load_extension = load_extension  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("kernelpilot", "kernelpilot.extension")}
    sys.modules.setdefault("kernelpilot", types.ModuleType("kernelpilot"))
    sys.modules["kernelpilot.extension"] = shim
    try:
        return _load(HERE / @@MODEL_FILE@@, "kp_candidate_" + OP.split("::")[-1])
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value


_problem = _load(PROBLEM, "kp_problem_" + OP.split("::")[-1])
_candidate_module = _candidate()
_models: dict[Any, Any] = {}


def _model(kind: str, device: Any) -> Any:
    key = (kind, str(device))
    if key not in _models:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        cls = _candidate_module.ModelNew if kind == "kernel" else _problem.Model
        with unset_fake_temporarily(), torch.device("meta" if str(device) == "meta" else "cpu"):
            model = cls(*_problem.get_init_inputs())
            _models[key] = model if str(device) == "meta" else model.to(device)
    return _models[key]


def _bind(model: Any, ps: tuple[Any, ...]) -> Any:
    """This call's parameters and buffers into our own ``ModelNew`` instance, by PARAMS name (a dict
    assignment each: torch.func's reparametrization costs tens of microseconds a call)."""
    for name, value in zip(PARAMS, ps):
        owner, _, leaf = name.rpartition(".")
        module = model.get_submodule(owner) if owner else model
        if leaf in module._buffers:
            module._buffers[leaf] = value
        else:
            module._parameters[leaf] = value
    return model


def _call(kind: str, tensors: tuple[Any, ...], device: Any = None) -> tuple[Any, ...]:
    xs, ps = tensors[:INPUTS], tensors[INPUTS:]
    device = device or (xs[0].device if xs else ps[0].device)
    if kind == "kernel":  # our own instance: the call's parameters bound by assignment
        out = _bind(_model(kind, device), ps)(*xs)
    else:  # the reference, also on fake tensors and under torch.func.vjp
        out = torch.func.functional_call(_model(kind, device), dict(zip(PARAMS, ps)), tuple(xs), strict=False)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return tuple(o.clone() if o._base is not None or any(o is t for t in tensors) else o for o in outs)


def _kernel_impl(*tensors: Any) -> Any:
    if TRITON:
        return _wrapped_forward(tensors)
    outs = _call("kernel", tensors)
    return outs[0] if OUTPUTS == 1 else outs


def _fake(*tensors: Any) -> Any:
    outs = _call("reference", tensors, device="meta")
    return outs[0] if OUTPUTS == 1 else outs


_REBOUND: dict[Any, Any] = {}


def _rebound(forward: Any) -> Any:
    """``forward`` over the candidate's globals with every Triton kernel wrapped (made once: a model's step
    calls it many times)."""
    if forward not in _REBOUND:
        from torch.library import wrap_triton

        names = dict(vars(_candidate_module))
        for key, value in list(names.items()):
            if type(value).__name__ in ("JITFunction", "Autotuner", "Heuristics"):
                names[key] = wrap_triton(value)
        for key, value in list(names.items()):
            if isinstance(value, types.FunctionType) and value.__module__ == _candidate_module.__name__:
                names[key] = types.FunctionType(value.__code__, names, value.__name__, value.__defaults__,
                                                value.__closure__)
        _REBOUND[forward] = types.FunctionType(forward.__code__, names, forward.__name__, forward.__defaults__,
                                               forward.__closure__)
    return _REBOUND[forward]


def _wrapped_forward(tensors: tuple[Any, ...]) -> Any:
    """ModelNew.forward with every Triton kernel it launches wrapped (torch.library.wrap_triton)."""
    model = _model("kernel", tensors[0].device)
    rebound = _rebound(type(model).forward)
    xs, ps = tensors[:INPUTS], tensors[INPUTS:]
    out = rebound(_bind(model, ps), *xs)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    outs = tuple(o.clone() if o._base is not None else o for o in outs)
    return outs[0] if OUTPUTS == 1 else outs


@@OP_DEFINITION@@


def _own_backward(grads: list[torch.Tensor], tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The candidate's ``ModelNew.backward(grads, *inputs)``: its parameters are this call's (PARAMS); it
    returns the inputs' gradients (a sequence, one per forward input, None for none) and the parameters'
    (a dict by PARAMS name)."""
    model = _model("kernel", tensors[0].device)
    xs, ps = tensors[:INPUTS], tensors[INPUTS:]
    got = _bind(model, ps).backward(tuple(grads), *xs)
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], dict)):
        raise TypeError("ModelNew.backward must return (input gradients, {parameter name: gradient})")
    given = [*got[0], *[got[1].get(name) for name in PARAMS]]
    if len(got[0]) != INPUTS:
        raise TypeError(f"ModelNew.backward returned {len(got[0])} input gradients for {INPUTS} inputs")
    out = []
    for t, g, name in zip(tensors, given, [f"input {i}" for i in range(INPUTS)] + list(PARAMS)):
        if g is None or not t.is_floating_point():
            out.append(t.new_zeros(t.shape) if t.is_floating_point() else t.new_empty(0, dtype=torch.float32))
            continue
        if tuple(g.shape) != tuple(t.shape):
            raise TypeError(f"ModelNew.backward: the gradient of {name} has shape {tuple(g.shape)}, "
                            f"not {tuple(t.shape)}")
        g = g.to(t.dtype).contiguous()
        # one tensor for two inputs (an add's backward), or a gradient that is an input or a grad given in:
        # an operator's outputs may alias neither each other nor its inputs
        if any(g.untyped_storage().data_ptr() == o.untyped_storage().data_ptr() for o in [*out, *grads, *tensors]
               if o.numel() and g.numel()):
            g = g.clone()
        out.append(g)
    return out


@torch.library.custom_op(OP + "_backward", mutates_args=())
def backward_op(grads: list[torch.Tensor], tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _backward_impl(grads, tensors)


def _backward_impl(grads: list[torch.Tensor], tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The candidate's own backward (OWN_BACKWARD), else the reference's (torch.func.vjp of the problem's
    Model), for the kernel's inputs."""
    if OWN_BACKWARD:
        return _own_backward(grads, tensors)
    floats = [i for i, t in enumerate(tensors) if t.is_floating_point()]
    _model("reference", tensors[0].device)  # built outside the transform

    def reference(*values: Any) -> tuple[Any, ...]:
        full = list(tensors)
        for i, v in zip(floats, values):
            full[i] = v
        return _call("reference", tuple(full))

    with torch.enable_grad():
        _, vjp = torch.func.vjp(reference, *[tensors[i].detach() for i in floats])
        got = vjp(tuple(grads))
    out = [t.new_empty(0, dtype=torch.float32) for t in tensors]
    for i, g in zip(floats, got):
        out[i] = g.contiguous()
    return out


@backward_op.register_fake
def _backward_fake(grads: list[torch.Tensor], tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.empty_like(t) if t.is_floating_point() else t.new_empty(0, dtype=torch.float32) for t in tensors]


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(*inputs)
    outs = output if isinstance(output, (tuple, list)) else (output,)
    ctx.out_meta = [(o.shape, o.dtype, o.device) for o in outs]


def _backward(ctx: Any, *grads: Any, run: Any = None) -> Any:
    if GRADIENT_CHECK is None:
        raise RuntimeError(REFUSAL)
    tensors = list(ctx.saved_tensors)
    grads = [g if g is not None else torch.zeros(s, dtype=d, device=dev) for g, (s, d, dev) in zip(grads, ctx.out_meta)]
    got = (run or backward_op)([g.contiguous() for g in grads], tensors)
    return tuple(g if t.is_floating_point() else None for g, t in zip(got, tensors))


op.register_autograd(_backward, setup_context=_setup)


class _Eager(torch.autograd.Function):
    """`op`'s eager path: the same forward and backward, called directly instead of through the
    dispatcher (the operator and its backward operator cost tens of microseconds a call each in Python)."""

    @staticmethod
    def forward(ctx: Any, *tensors: Any) -> Any:
        outs = _call("kernel", tensors)  # a Triton candidate's own launches: nothing to trace here
        _setup(ctx, tensors, outs)
        return outs[0] if OUTPUTS == 1 else outs

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return _backward(ctx, *grads, run=_backward_impl)


def call(*tensors: Any) -> Any:
    """`op` under torch.compile / torch.export (one operator in the graph), the direct path in eager."""
    if torch.compiler.is_compiling():
        return op(*tensors)
    return _Eager.apply(*tensors)


def install(model: Any, paths: list[str] | None = None) -> list[str]:
    """Swap the kernel into ``model`` at the recorded module paths (ORIGIN["paths"]); returns what was
    swapped. A call whose arguments do not have a recorded shape and dtype runs the original forward."""
    if not (HERE / "dropin_swap.py").is_file():
        raise RuntimeError(f"{HERE / 'dropin_swap.py'} is missing; approve the candidate again to rewrite it.")
    # registered in sys.modules under a name of this operator's: torch.compile imports a traced function's
    # module by its name (torch 2.11's Dynamo failed with "No module named 'kp_swap'" otherwise)
    swap = _load(HERE / "dropin_swap.py", "kp_swap_" + OP.replace("::", "_"))
    return swap.install(model, call, ORIGIN, PARAMS, PROBLEM.parent, paths)
'''

CUSTOM_OP = '''@torch.library.custom_op(OP, mutates_args=())
def op(@@SIGNATURE@@) -> @@RETURNS@@:
    return _kernel_impl(@@ARGS@@)


@op.register_fake
def _op_fake(@@SIGNATURE@@) -> @@RETURNS@@:
    return _fake(@@ARGS@@)'''

TRITON_OP = '''# Triton's interpreter (TRITON_INTERPRET=1, a CPU run) makes kernels that wrap_triton does not know: a
# triton_op would run them on torch.compile's fake tensors. There, and with KERNELPILOT_DROPIN_OPAQUE=1, the
# operator is an opaque custom op (its fake: the problem's reference on fake tensors)
OPAQUE = os.environ.get("KERNELPILOT_DROPIN_OPAQUE") == "1" or os.environ.get("TRITON_INTERPRET") == "1"
if OPAQUE:
    @torch.library.custom_op(OP, mutates_args=())
    def op(@@SIGNATURE@@) -> @@RETURNS@@:
        return _kernel_impl(@@ARGS@@)

    @op.register_fake
    def _op_fake(@@SIGNATURE@@) -> @@RETURNS@@:
        return _fake(@@ARGS@@)
else:  # torch.compile traces into the wrapped Triton kernels; their fake comes from the trace
    @torch.library.triton_op(OP, mutates_args=())
    def op(@@SIGNATURE@@) -> @@RETURNS@@:
        return _kernel_impl(@@ARGS@@)'''
