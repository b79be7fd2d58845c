"""What the converter needs to know about a problem's Model, learned without a GPU.

The Model is built on the meta device (no memory, no values): its parameters and buffers (names,
shapes, dtypes), its plain tensor attributes (``self.hidden = torch.randn(...)``: neither parameter nor
buffer, so the harness never loads them), the forward's argument names and input shapes, and how many
tensors forward returns. A constructor the meta device cannot run (``Tensor.item()`` on a meta tensor:
the Swin models compute a drop-path schedule with ``.item()``) is run on the CPU instead, seeded, and
the model then moved to the meta device. A model with an RNN module is built on the CPU (the meta
device would run it step by step in Python, for minutes) when its weights and inputs fit in 2 GiB. A
forward that fails on the meta device leaves the output
count unknown, which only disables the output-count check.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.problem import CPU_FALLBACK_LIMIT_BYTES, load_problem, make_inputs

Spec = tuple[str, tuple[int, ...], str]  # (name, shape, dtype)


@dataclass
class Source:
    """Where ModelNew finds one graph input: ``self.linear.weight`` or the forward argument ``x``."""

    expr: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]


@dataclass
class ModelFacts:
    problem: Path
    module: ModuleType
    model: Any  # the Model, on the meta device
    inputs: list[Any]  # get_inputs(), meta tensors
    arg_names: list[str]  # forward's argument names, one per input
    params: list[Spec]
    buffers: list[Spec]
    attributes: list[Spec] = field(default_factory=list)  # plain tensor attributes: (expression, shape, dtype)
    outputs: int | None = None  # tensors forward returns (None: forward does not run on the meta device)
    built_on: str = "meta"  # or "cpu": the constructor needed real values, or the model has an RNN

    @property
    def given(self) -> list[Source]:
        import torch

        return [Source(n, tuple(x.shape), tuple(x.stride())) if isinstance(x, torch.Tensor) else Source(n, (), ())
                for n, x in zip(self.arg_names, self.inputs)]


def state_expr(name: str, kind: str) -> str:
    """``self.a.b`` for a dotted state name of identifiers, else ``self.get_parameter('layers.0.w')``."""
    if all(p.isidentifier() for p in name.split(".")):
        return f"self.{name}"
    return f"self.get_{kind}({name!r})"


def attribute_expr(path: str, attr: str) -> str:
    """A plain attribute ``attr`` of the submodule at ``path`` ("" for the model itself)."""
    if not path:
        return f"self.{attr}"
    if all(p.isidentifier() for p in path.split(".")):
        return f"self.{path}.{attr}"
    return f"self.get_submodule({path!r}).{attr}"


def plain_tensors(model: Any) -> dict[str, tuple[str, str, Any]]:
    """Expression -> (submodule path, attribute, tensor) for every plain tensor attribute of the model."""
    import torch

    found = {}
    for path, sub in model.named_modules():
        for attr, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_"):
                found[attribute_expr(path, attr)] = (path, attr, value)
    return found


def _has_rnn(model: Any) -> bool:
    import torch

    return any(isinstance(m, torch.nn.RNNBase) for m in model.modules())


def _bytes(model: Any, inputs: list[Any]) -> int:
    import torch

    tensors = list(model.parameters()) + list(model.buffers()) + [x for x in inputs if isinstance(x, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def model_facts(problem: str | Path) -> ModelFacts:
    """Build the problem's Model and inputs on the meta device (see the module docstring)."""
    import torch

    prob = load_problem(problem)
    module = prob.load_module()
    built_on = "meta"
    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs())
    except Exception:  # noqa: BLE001 - a constructor that needs values (.item()): build it on the CPU
        built_on = "cpu"
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).to("meta")
    with torch.device("meta"):
        inputs = list(make_inputs(module))
    if _has_rnn(model) and _bytes(model, inputs) <= CPU_FALLBACK_LIMIT_BYTES:
        # the meta device runs an RNN step by step in Python (a 6-layer LSTM over 512 steps: 16 s a call);
        # the CPU runs it natively in a second, and an RNN problem's weights and inputs are small
        built_on = "cpu"
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        torch.manual_seed(0)
        inputs = list(make_inputs(module))
    model.eval()
    signature = inspect.signature(model.forward).parameters
    names = [p for p in signature if p != "self"]
    if len(names) < len(inputs) or any(signature[n].kind in (inspect.Parameter.VAR_POSITIONAL,
                                                             inspect.Parameter.VAR_KEYWORD) for n in names):
        names = [f"input{i}" for i in range(len(inputs))]
    state = dict(model.state_dict(keep_vars=True))
    param_names = {n for n, _ in model.named_parameters()}
    params = [(n, tuple(t.shape), str(t.dtype)) for n, t in state.items() if n in param_names]
    buffers = [(n, tuple(t.shape), str(t.dtype)) for n, t in state.items() if n not in param_names]
    attributes = [(expr, tuple(t.shape), str(t.dtype)) for expr, (_, _, t) in plain_tensors(model).items()]
    outputs = None
    try:
        with torch.no_grad():
            out = model(*inputs)
        leaves = out if isinstance(out, (tuple, list)) else [out]
        outputs = sum(isinstance(o, torch.Tensor) for o in leaves)
    except Exception:  # noqa: BLE001 - an op without a meta kernel: the output count stays unknown
        outputs = None
    return ModelFacts(Path(prob.path), module, model, inputs, names[:len(inputs)], params, buffers, attributes,
                      outputs, built_on)
