"""A dataflow trace of a script's steps: every ATen call with the values it read and wrote.

Each tensor gets a value id the first time it is seen (keyed weakly on the tensor object, so ids are
never confused after a tensor is freed). The root model's parameters and buffers are named values;
every module call of the root's tree is recorded with its tensor arguments (positional and keyword)
and the structure of its result. Each ATen call records the module stack it ran in (forward), or,
in the backward pass, the module whose forward created the autograd node being run
(``torch._C._current_autograd_node``), and its time: CUDA events on the GPU, the host clock on the
CPU. Tensors autograd saves for backward are noted (``saved``).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from kernelpilot.profiling.op_timer import ProfilerTimer, choice
from kernelpilot.profiling.records import VIEW_OPS, ModuleCall, OpRecord, TensorArg, TensorRef, vids_in
from kernelpilot.profiling.script_run import run_script

LIFT_OPS = {"aten::lift_fresh", "aten::lift_fresh_copy", "aten::lift"}
MAX_CONSTANT = 1024  # elements of a lifted constant kept by value (larger ones stay externals)


def _holds_tensor(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return isinstance(value, (tuple, list)) and any(_holds_tensor(v) for v in value)


def nbytes_of(t: Any) -> int:
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size() if t.numel() else 0


class Trace:
    """Records ops and module calls while installed (see ``install``/``mode``)."""

    def __init__(self) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self.ops: list[OpRecord] = []
        self.calls: list[ModuleCall] = []
        self.params: dict[int, str] = {}  # vid -> dotted name under the root
        self.buffers: set[int] = set()
        self.param_specs: dict[str, TensorRef] = {}
        self.saved: set[int] = set()
        self.alias: dict[int, int] = {}  # view value -> value it views
        self.constants: dict[int, tuple[Any, str]] = {}  # vid -> (value as lists, dtype) of lifted Python data
        self.root_outputs: set[int] = set()
        self.device = "cpu"
        self.timer: Any = None  # op_timer.ProfilerTimer when the profiler times the calls
        self.timing = "host"  # how the calls were timed: profiler, events or host (op_timer.choice)
        self.step = -1
        self._vids: Any = WeakIdKeyDictionary()
        self._next = 0
        self._stack: list[ModuleCall] = []
        self._node_stack: dict[Any, tuple[str, ...]] = {}
        self._recent: list[tuple[Any, tuple[str, ...]]] = []
        self._pending: list[tuple[int, Any, Any]] = []
        self._handles: list[Any] = []
        self._paths: dict[int, str] = {}
        self.optimizing = 0  # inside an optimizer's step(): its calls' phase is "optimizer"

    # ---- values ----------------------------------------------------------------------------------
    def vid(self, t: Any) -> int:
        v = self._vids.get(t)
        if v is None:
            v = self._next
            self._next += 1
            self._vids[t] = v
        return v

    def ref(self, t: Any) -> TensorRef:
        from torch.utils._python_dispatch import _disable_current_modes

        spec = TensorArg(tuple(t.shape), str(t.dtype))
        if not (t.dtype.is_floating_point or t.dtype.is_complex or not t.numel() or str(t.dtype) == "torch.bool"
                or t.device.type == "meta"):
            with _disable_current_modes():
                spec.low, spec.high = int(t.min()), int(t.max())
        return TensorRef(self.vid(t), spec, nbytes_of(t))

    def spec(self, v: Any) -> Any:
        import torch

        if isinstance(v, torch.Tensor):
            return self.ref(v)
        if isinstance(v, (list, tuple)):
            return [self.spec(x) for x in v]
        if isinstance(v, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
            return v
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        return f"<{type(v).__name__}>"

    def structure(self, v: Any) -> Any:
        import torch

        if isinstance(v, torch.Tensor):
            return self.vid(v)
        if isinstance(v, tuple):
            return ("tuple", [self.structure(x) for x in v])
        if isinstance(v, list):
            return ("list", [self.structure(x) for x in v])
        if isinstance(v, dict):
            return ("dict", {str(k): self.structure(x) for k, x in v.items()})
        if v is None or isinstance(v, (bool, int, float, str)):
            return ("lit", repr(v))
        return ("lit", f"<{type(v).__name__}>")

    def _constant(self, t: Any) -> None:
        """Keep the value of a small tensor made from Python data, so a replay can make it again."""
        import torch
        from torch.utils._python_dispatch import _disable_current_modes

        if isinstance(t, torch.Tensor) and t.numel() <= MAX_CONSTANT and t.device.type != "meta":
            with _disable_current_modes():
                value = t.tolist()
            if not any(w in repr(value) for w in ("nan", "inf")):  # a literal Python can read back
                self.constants[self.vid(t)] = (value, str(t.dtype))

    # ---- modules ---------------------------------------------------------------------------------
    def attach(self, root: Any) -> None:
        """Name the root's parameters and buffers and hook every module of its tree."""
        import torch

        for name, p in root.named_parameters(remove_duplicate=False):
            vid = self.vid(p)
            self.params.setdefault(vid, name)
            self.param_specs.setdefault(self.params[vid], self.ref(p))
        for name, b in root.named_buffers(remove_duplicate=False):
            if isinstance(b, torch.Tensor):
                vid = self.vid(b)
                self.params.setdefault(vid, name)
                self.buffers.add(vid)
                self.param_specs.setdefault(self.params[vid], self.ref(b))
        for path, module in root.named_modules(remove_duplicate=False):
            self._paths.setdefault(id(module), path)
            self._handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post, with_kwargs=True))
        self.device = next((p.device.type for p in root.parameters()), "cpu")

    def detach_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        import torch

        self._flush_nodes()
        call = ModuleCall(self._paths.get(id(module), "?"), type(module).__name__, id(module), self.step, len(self.ops),
                          grad=torch.is_grad_enabled())
        items = [(str(i), a) for i, a in enumerate(args)] + list(kwargs.items())
        for key, value in items:
            self._argument(call, key, value)
        self._stack.append(call)
        self.calls.append(call)

    def _argument(self, call: ModuleCall, key: str, value: Any) -> None:
        """One argument of a module call: a tensor is an input; a tuple, list or dict holding tensors (the
        ``position_embeddings=(cos, sin)`` of a decoder layer) gives one input per tensor, keyed by its place
        (``position_embeddings.0``); anything else is a literal."""
        import torch

        if isinstance(value, torch.Tensor):
            call.inputs.append((key, self.ref(value)))
        elif value is None or isinstance(value, (bool, int, float, str)):
            call.literals[key] = value
        elif isinstance(value, (tuple, list, dict)) and _holds_tensor(value):
            for k, v in (value.items() if isinstance(value, dict) else enumerate(value)):
                self._argument(call, f"{key}.{k}", v)
        else:
            call.literals[key] = f"<{type(value).__name__}>"
            call.objects[key] = type(value).__name__

    def _post(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        self._flush_nodes()
        if not self._stack:
            return
        call = self._stack.pop()
        call.last_op = len(self.ops)
        call.output = self.structure(output)
        if isinstance(output, dict) and type(output) is not dict:
            call.output_class = f"{type(output).__module__}:{type(output).__qualname__}"
        if not self._stack:
            self.root_outputs.update(vids_in(call.output))

    # ---- ops -------------------------------------------------------------------------------------
    def _flush_nodes(self) -> None:
        """Outputs of the last op now carry their grad_fn: remember which module made each node."""
        for t, stack in self._recent:
            node = getattr(t, "grad_fn", None)
            if node is not None and node not in self._node_stack:
                self._node_stack[node] = stack
        self._recent.clear()

    def call(self, func: Any, args: tuple, kwargs: dict) -> Any:
        import torch

        self._flush_nodes()
        node = torch._C._current_autograd_node()
        if node is not None:
            phase, stack = "backward", self._node_stack.get(node, ())
        elif self._stack:
            phase, stack = "forward", tuple(c.path for c in self._stack)
        else:
            phase, stack = ("optimizer" if self.optimizing else "other"), ()
        if func._schema.name in LIFT_OPS:  # a tensor made from Python data (torch.tensor(...)) inside a forward
            self._constant(args[0])
        spec_args = [self.spec(a) for a in args]
        spec_kwargs = {k: self.spec(v) for k, v in kwargs.items()}
        events = self.timing == "events" and any(isinstance(a, torch.Tensor) and a.is_cuda
                                                 for a in _flat([*args, *kwargs.values()]))
        if self.timer is not None:  # the profiler's device records (op_timer): no host wait counted
            with self.timer.range(len(self.ops)):
                out = func(*args, **kwargs)
            ms = 0.0
        elif events:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = func(*args, **kwargs)
            end.record()
            ms = 0.0
        else:
            t0 = time.perf_counter()
            out = func(*args, **kwargs)
            ms = (time.perf_counter() - t0) * 1e3
        flat = out if isinstance(out, (tuple, list)) else [out]
        outputs: list[int | None] = []
        out_bytes = 0
        for o in flat:
            if isinstance(o, torch.Tensor):
                outputs.append(self.vid(o))
                out_bytes += nbytes_of(o)
                if phase == "forward":
                    self._recent.append((o, stack))
            else:
                outputs.append(None)
        kind = ("tensor" if isinstance(out, torch.Tensor) else "tuple" if isinstance(out, tuple)
                else "list" if isinstance(out, list) else "none" if out is None else "other")
        record = OpRecord(len(self.ops), func._schema.name, func._overloadname, spec_args, spec_kwargs, outputs, kind,
                          out_bytes, phase, stack, self.step, ms)
        if record.name in VIEW_OPS:
            ins = record.tensor_inputs()
            if ins:
                base = self.alias.get(ins[0].vid, ins[0].vid)
                for o in outputs:
                    if o is not None and o != base:
                        self.alias[o] = base
        self.ops.append(record)
        if events:
            self._pending.append((record.index, start, end))
        return out

    def pack(self, t: Any) -> Any:
        import torch

        if isinstance(t, torch.Tensor):
            vid = self._vids.get(t)
            if vid is not None:
                self.saved.add(self.alias.get(vid, vid))
                self.saved.add(vid)
        return t

    def collect(self) -> None:
        for index, start, end in self._pending:
            self.ops[index].ms = start.elapsed_time(end)
        self._pending.clear()
        if self.timer is not None and self.ops:
            for index, ms in self.timer.times_ms().items():
                if index < len(self.ops):
                    self.ops[index].ms = ms

    # ---- queries ---------------------------------------------------------------------------------
    def consumers(self) -> dict[int, list[int]]:
        """value id -> indexes of the ops that read it (a view's readers count for its base too)."""
        out: dict[int, list[int]] = {}
        for op in self.ops:
            for r in op.tensor_inputs():
                out.setdefault(r.vid, []).append(op.index)
                base = self.alias.get(r.vid)
                if base is not None:
                    out.setdefault(base, []).append(op.index)
        return out

    def producers(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for op in self.ops:
            for v in op.outputs:
                if v is not None:
                    out.setdefault(v, op.index)
        return out


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, (list, tuple)) else [v])
    return out


def record_script(script: Any, argv: list[str], steps: int) -> tuple[Trace, Any]:
    """Run ``script`` for ``steps`` steps under the trace; returns (trace, ScriptRun)."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    from torch.utils._python_dispatch import TorchDispatchMode

    trace = Trace()
    how = choice(torch.cuda.is_available())
    trace.timer = ProfilerTimer(torch.cuda.is_available()) if how == "profiler" else None
    trace.timing = how

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
            if func.namespace == "profiler":  # the profiler's own ranges are not the model's calls
                return func(*args, **(kwargs or {}))
            return trace.call(func, args, kwargs or {})

    def on_step(i: int) -> None:
        trace.step = i

    @contextlib.contextmanager
    def context() -> Any:
        with Mode(), torch.autograd.graph.saved_tensors_hooks(trace.pack, lambda t: t):
            yield

    def optimizing(delta: int) -> Any:
        def hook(*_: Any) -> None:
            trace.optimizing = max(trace.optimizing + delta, 0)
        return hook

    # every optimizer's step() (torch.optim's global hooks): its calls are the step's "optimizer" part
    hooks = [register_optimizer_step_pre_hook(optimizing(1)), register_optimizer_step_post_hook(optimizing(-1))]
    try:
        with trace.timer if trace.timer is not None else contextlib.nullcontext():
            run = run_script(script, argv, steps=steps, context=context(), on_root=trace.attach, on_step=on_step)
    finally:
        for h in hooks:
            h.remove()
        trace.detach_hooks()
        trace.collect()
    return trace, run
