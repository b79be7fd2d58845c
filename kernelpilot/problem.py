"""Problem files in KernelBench format: a static check, an import, and a shape/bytes/FLOPs analysis.

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` (forward arguments) and
``get_init_inputs()`` (constructor arguments). ``load_problem`` checks the file with ``ast`` only
(no torch); ``Problem.load_module`` imports it; ``analyse`` runs it once on the meta device (CPU
with the real sizes as a fallback when an op has no meta kernel) to learn the output shapes, the
minimal bytes moved and, where torch's flop counter knows the ops, the FLOPs.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.errors import ProblemError, ProblemNotFoundError

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
CPU_FALLBACK_LIMIT_BYTES = 2 << 30  # never allocate more than this on CPU to analyse a problem
_counter = itertools.count()


@dataclass
class Problem:
    """A KernelBench problem file that passed the static check."""

    path: Path
    name: str
    source: str

    def load_module(self) -> ModuleType:
        """Import the file under a unique module name (torch is imported by the file itself)."""
        digest = hashlib.sha1(str(self.path).encode()).hexdigest()[:8]
        stem = "".join(c if c.isalnum() else "_" for c in self.name)
        module_name = f"kernelpilot_problem_{stem}_{digest}_{next(_counter)}"
        spec = importlib.util.spec_from_file_location(module_name, self.path)
        if spec is None or spec.loader is None:
            raise ProblemError(f"cannot import {self.path}; make sure it is a readable .py file.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(module_name, None)
            raise ProblemError(
                f"importing {self.path} failed{_where(exc, self.path)}: {type(exc).__name__}: {exc}; fix the problem "
                "file."
            ) from exc
        return module


def _where(exc: BaseException, path: Path) -> str:
    """`` at line N`` for the innermost frame of ``exc`` inside ``path``, else empty."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename) == path:
            line = frame.lineno
    return f" at line {line}" if line else ""


def load_problem(path: str | Path) -> Problem:
    """Read ``path`` and check it statically: a class ``Model`` and functions ``get_inputs``, ``get_init_inputs``."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ProblemNotFoundError(f"problem file {path} does not exist; check the path (or run `kernelpilot init` to "
                                   "write a starter problem).")
    if path.is_dir():
        candidate = path / "problem.py"
        if candidate.is_file():
            path = candidate
        else:
            raise ProblemError(f"{path} is a directory without a problem.py; pass the problem .py file itself.")
    if path.suffix != ".py":
        raise ProblemError(f"problem file {path} is not a .py file; pass a Python file in KernelBench format (Model, "
                           "get_inputs, get_init_inputs).")
    path = path.resolve()
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ProblemError(f"problem file {path} is not UTF-8 text; save it as UTF-8.") from None
    except OSError as exc:
        raise ProblemError(f"cannot read problem file {path} ({exc.strerror}); check its permissions.") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path} has a syntax error at line {exc.lineno}: {exc.msg}; fix it and try "
                           "again.") from None
    check_tree(tree, path)
    return Problem(path=path, name=path.stem, source=source)


def top_level_definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """Name -> statement for the module's top-level classes, functions and assigned names (source order)."""
    top: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            top[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    top[target.id] = node
    return top


def check_tree(tree: ast.Module, path: Path) -> None:
    """Raise ProblemError unless the module defines Model (with forward) and the two input builders."""
    top = top_level_definitions(tree)
    model = top.get("Model")
    if model is None:
        raise ProblemError(f"{path} defines no class Model; a KernelBench problem needs `class Model(nn.Module)` with "
                           "a forward method.")
    if not isinstance(model, ast.ClassDef):
        raise ProblemError(f"{path} line {model.lineno}: Model is not a class; define `class Model(nn.Module)`.")
    plain_base = all(ast.unparse(b) in ("nn.Module", "torch.nn.Module", "Module") for b in model.bases)
    has_forward = any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model.body)
    if model.bases and plain_base and not has_forward:
        raise ProblemError(f"{path} line {model.lineno}: class Model has no forward method; add `def forward(self, "
                           "...)`.")
    for name in REQUIRED_FUNCTIONS:
        node = top.get(name)
        if node is None:
            raise ProblemError(f"{path} defines no function {name}(); a KernelBench problem needs `def {name}():` "
                               "returning a list.")
        if isinstance(node, ast.AsyncFunctionDef):
            raise ProblemError(f"{path} line {node.lineno}: {name} is async; make it a plain `def {name}():`.")
        if not isinstance(node, ast.FunctionDef):
            raise ProblemError(f"{path} line {node.lineno}: {name} is not a function; define it with `def {name}():`.")
        required = [a for a in node.args.args[: len(node.args.args) - len(node.args.defaults)]]
        if required or [a for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is None]:
            raise ProblemError(f"{path} line {node.lineno}: {name}() must take no required arguments.")


@dataclass
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # torch name without the "torch." prefix, e.g. "bfloat16"
    nbytes: int

    @classmethod
    def of(cls, tensor: Any) -> TensorSpec:
        return cls(tuple(int(d) for d in tensor.shape), str(tensor.dtype).removeprefix("torch."),
                   int(tensor.numel()) * int(tensor.element_size()))


@dataclass
class ProblemInfo:
    """What one run of the problem tells: shapes, dtypes, minimal bytes moved, FLOPs."""

    name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    parameter_bytes: int  # parameters and buffers, each distinct tensor once
    bytes_moved: int  # inputs + parameters/buffers read once, outputs written once
    flops: int | None  # None when torch's flop counter knows none of the ops (e.g. pure elementwise)
    dtypes: list[str]
    parameter_count: int = 0
    flops_by_op: dict[str, int] = field(default_factory=dict)
    other_inputs: list[str] = field(default_factory=list)  # repr of non-tensor forward arguments
    init_inputs: list[str] = field(default_factory=list)  # repr of the constructor arguments
    device: str = "meta"  # where the analysis ran: "meta" or "cpu"
    shape_set: str = "default"

    @property
    def primary_dtype(self) -> str:
        """The dtype the operator computes in: the first floating input's, else the first output's."""
        for spec in [*self.inputs, *self.outputs]:
            if spec.dtype.startswith(("float", "bfloat", "complex")):
                return spec.dtype
        return self.outputs[0].dtype if self.outputs else "float32"

    @property
    def arithmetic_intensity(self) -> float | None:
        return self.flops / self.bytes_moved if self.flops and self.bytes_moved else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemInfo:
        data = dict(data)
        for key in ("inputs", "outputs"):
            data[key] = [TensorSpec(tuple(s["shape"]), s["dtype"], int(s["nbytes"])) for s in data.get(key, [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def _flatten_outputs(value: Any, path: str, out: list[Any]) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _flatten_outputs(item, f"{path}[{i}]", out)
    else:
        raise ProblemError(f"Model.forward returned {type(value).__name__} as its {path}; it must return a tensor or a "
                           "tuple/list of tensors.")


def make_inputs(module: ModuleType, shape_set: dict[str, Any] | None = None) -> list[Any]:
    """Forward arguments: ``get_inputs()``, or an ``extra_shapes`` entry (see kernelpilot.config).

    Creates tensors on the current default device (use ``with torch.device(...)`` to choose).
    """
    import torch

    base = _call_builder(module, "get_inputs")
    if shape_set is None:
        return base
    spec = shape_set["inputs"]
    if isinstance(spec, str):
        try:
            value = eval(spec, vars(module))  # noqa: S307 - the engineer's own config, like the problem file
        except Exception as exc:
            raise ProblemError(f"extra shape set {shape_set['name']!r}: evaluating its inputs failed "
                               f"({type(exc).__name__}: {exc}); fix it in the config.") from exc
        if not isinstance(value, (list, tuple)):
            raise ProblemError(f"extra shape set {shape_set['name']!r} returned {type(value).__name__}; its inputs "
                               "expression must give a list.")
        if len(value) != len(base):  # forward would be called with the wrong arguments (a set of another problem)
            raise ProblemError(f"extra shape set {shape_set['name']!r} gives {len(value)} inputs but get_inputs() "
                               f"returns {len(base)}; give as many, in get_inputs()' order, in the config.")
        return list(value)
    tensors = [i for i, v in enumerate(base) if isinstance(v, torch.Tensor)]
    if len(spec) != len(tensors):
        raise ProblemError(
            f"extra shape set {shape_set['name']!r} gives {len(spec)} shapes but get_inputs() returns {len(tensors)} "
            "tensors; give one shape per tensor."
        )
    out = list(base)
    for index, shape in zip(tensors, spec, strict=True):
        like = base[index]
        if like.dtype.is_floating_point or like.dtype.is_complex:
            out[index] = torch.randn(shape, dtype=like.dtype)
        elif like.dtype == torch.bool:
            out[index] = torch.rand(shape) < 0.5
        else:
            high = max(int(like.max()) + 1, 2) if like.device.type != "meta" and like.numel() else 2
            out[index] = torch.randint(0, high, shape, dtype=like.dtype)
    return out


def _call_builder(module: ModuleType, name: str) -> list[Any]:
    builder = getattr(module, name, None)
    if not callable(builder):
        raise ProblemError(f"{module.__file__}: {name} is not callable; define `def {name}():` returning a list.")
    try:
        value = builder()
    except ProblemError:
        raise
    except Exception as exc:
        raise ProblemError(f"{name}() in {module.__file__} raised {type(exc).__name__}: {exc}; fix the problem "
                           "file.") from exc
    if not isinstance(value, (list, tuple)):
        raise ProblemError(f"{name}() in {module.__file__} returned {type(value).__name__}; it must return a list.")
    return list(value)


def _run_once(module: ModuleType, device: str, shape_set: dict[str, Any] | None) -> ProblemInfo:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model_cls = getattr(module, "Model", None)
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise ProblemError(f"{module.__file__}: Model is not a torch.nn.Module subclass; define `class "
                           "Model(nn.Module)`.")
    torch.manual_seed(0)
    with torch.device(device):
        init_inputs = _call_builder(module, "get_init_inputs")
        try:
            model = model_cls(*init_inputs)
        except Exception as exc:
            raise _RunError(f"Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}", exc) from exc
        inputs = make_inputs(module, shape_set)
        if device == "cpu":
            _check_cpu_size(module, inputs, model)
        counter = FlopCounterMode(display=False)
        try:
            with torch.no_grad(), counter:
                result = model(*inputs)
        except Exception as exc:
            raise _RunError(f"Model.forward raised {type(exc).__name__}: {exc}", exc) from exc
    outputs: list[Any] = []
    try:
        _flatten_outputs(result, "output", outputs)
    except ProblemError as exc:
        raise ProblemError(f"{module.__file__}: {exc}") from None
    if not outputs:
        raise ProblemError(f"Model.forward in {module.__file__} returned no tensors; it must return a tensor or a "
                           "tuple of tensors.")

    in_tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    params = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    unique_outputs = list({id(t): t for t in outputs}.values())
    in_specs = [TensorSpec.of(t) for t in in_tensors]
    out_specs = [TensorSpec.of(t) for t in outputs]
    param_bytes = sum(TensorSpec.of(t).nbytes for t in params.values())
    written = sum(TensorSpec.of(t).nbytes for t in unique_outputs)
    by_op = {str(op).removeprefix("aten."): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    total_flops = int(counter.get_total_flops())
    dtypes = sorted({s.dtype for s in [*in_specs, *out_specs]}
                    | {str(t.dtype).removeprefix("torch.") for t in params.values()})
    return ProblemInfo(
        name=Path(module.__file__ or "problem").stem,
        inputs=in_specs,
        outputs=out_specs,
        parameter_bytes=param_bytes,
        parameter_count=sum(int(t.numel()) for t in params.values()),
        bytes_moved=sum(s.nbytes for s in in_specs) + param_bytes + written,
        flops=total_flops or None,
        flops_by_op=by_op,
        dtypes=dtypes,
        other_inputs=[repr(x) for x in inputs if not isinstance(x, torch.Tensor)],
        init_inputs=[repr(x) for x in init_inputs],
        device=device,
        shape_set=shape_set["name"] if shape_set else "default",
    )


class _RunError(Exception):
    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


def _check_cpu_size(module: ModuleType, inputs: list[Any], model: Any) -> None:
    import torch

    total = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    total += sum(p.numel() * p.element_size() for p in model.parameters())
    if total > CPU_FALLBACK_LIMIT_BYTES:
        raise ProblemError(
            f"{module.__file__}: the model does not run on the meta device and its inputs and weights "
            f"({total / 2**30:.1f} GiB) are too large to analyse on CPU; use ops with meta kernels or smaller sizes."
        )


def analyse(problem: Problem, device: str = "meta", shape_set: dict[str, Any] | None = None) -> ProblemInfo:
    """Run the problem once (meta device first, CPU fallback) and describe its data movement.

    ``bytes_moved`` counts every tensor input, each distinct parameter/buffer once, and each
    distinct output once: the minimum a kernel must move, the basis of the memory speed of light.
    """
    module = problem.load_module()
    try:
        return _run_once(module, device, shape_set)
    except _RunError as first:
        if device != "meta":
            raise ProblemError(f"{problem.path}: {first}{_where(first.cause, problem.path)}; fix the problem "
                               "file.") from first.cause
        try:
            # Ops without meta kernels (data-dependent shapes, .item()) need real tensors.
            return _run_once(module, "cpu", shape_set)
        except _RunError as second:
            raise ProblemError(
                f"{problem.path}: {second}{_where(second.cause, problem.path)} (on CPU, after the meta device failed "
                f"with: {first}); fix the problem file."
            ) from second.cause
