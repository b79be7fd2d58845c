"""One measured run of the user's script for `kernelpilot apply`, with some drop-in kernels swapped in.

The script runs as it is (its own torch.compile included; ``compile_root`` compiles the model's
forward when it does not) for ``warmup + steps`` steps. A step is the time from one call of the model
(its root module) to the next: forward, backward and the optimizer step, or forward alone for an
inference script. Recorded: every step's time (host clock, synchronized), the first step's model
output and the gradients at its first optimizer step (copies on the host, for the end-to-end comparison: nothing a
run keeps holds device memory in the runs after it), the
forward time of each swapped module per step when ``time_parts`` (CUDA events or host clock around it; not under
``compile_root``: hooks inside the compiled forward would break its graph and, appending to a list
Dynamo guards on, recompile it every call until Dynamo gives up and runs it eagerly), and how many
calls of each swapped forward ran the kernel or the original. And (``kernelpilot.dropin.apply_measure``) the
peak device memory of the measured steps, the loss at every step, and Dynamo's graph breaks and recompilations.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.dropin.apply_measure import CompileCounts, DynamoWatch, LossRecorder, Memory, MemoryWatch
from kernelpilot.dropin.apply_perturb import gradient_hooks, perturbed
from kernelpilot.errors import ScriptError
from kernelpilot.profiling.script_run import median_spread, run_script

WARMUP = 3  # steps each run of `kernelpilot apply` takes before the timed ones
_LOADED: dict[Path, Any] = {}  # a drop-in module registers its operator: load each once per process


def load_dropin(path: Path) -> Any:
    path = path.resolve()
    if path not in _LOADED:
        spec = importlib.util.spec_from_file_location(f"kp_dropin_{len(_LOADED)}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # torch.compile imports a traced function's module by its name
        spec.loader.exec_module(module)
        _LOADED[path] = module
    return _LOADED[path]


@dataclass
class RunResult:
    step_ms: list[float] = field(default_factory=list)
    output: Any = None
    grads: dict[str, Any] | None = None
    part_ms: dict[str, list[float]] = field(default_factory=dict)  # dropin -> forward ms per step
    stats: dict[str, dict[str, int]] = field(default_factory=dict)  # dropin -> {"kernel": n, "original": n}
    swapped: dict[str, list[str]] = field(default_factory=dict)  # dropin -> module paths
    error: str = ""
    losses: list[float | None] | None = None  # the loss at every step of the run (warm-up included); None: none
    loss_dtype: str = ""
    memory: Memory = field(default_factory=Memory)  # over the measured steps
    compiled: CompileCounts | None = None  # what Dynamo did (None: nothing was compiled in the run)

    def timed(self, warmup: int) -> list[float]:
        """The step times past ``warmup`` (all of them when the run had no more): what ``median`` covers."""
        return self.step_ms[warmup:] or self.step_ms

    def median(self, warmup: int) -> tuple[float, float]:
        return median_spread(self.timed(warmup))


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, (tuple, list)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if hasattr(value, "to_tuple"):  # transformers' ModelOutput
        return _clone(value.to_tuple())
    return None


def _sync() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class _RunHooks:
    """What one measured run hooks into the script's model: the drop-ins swapped in (or only named), the timers
    of the parts they replace, the perturbed outputs, the first output and the first optimizer step's gradients."""

    def __init__(self, result: RunResult, dropins: list[Path], *, swap: bool, perturb: list[str], time_parts: bool,
                 compile_root: bool, warmup: int, compile_mode: str = "default",
                 perturb_grads: list[Path] | None = None) -> None:
        self.result = result
        self.warmup = warmup
        self.memory = MemoryWatch()
        self.losses = LossRecorder()
        self.dropins = dropins
        self.swap, self.perturb, self.time_parts, self.compile_root = swap, perturb, time_parts, compile_root
        self.compile_mode = compile_mode
        self.root: Any = None
        self.step = 0
        self.forward_ms: dict[str, list[tuple[int, Any, Any]]] = {}  # dropin -> (step, start, end or None)
        self.perturb_state: dict[str, Any] = {}  # perturbed's own random generators
        self.perturb_grads = list(perturb_grads or [])  # drop-ins whose parts' gradients move by one ulp too
        self.handles: list[Any] = []

    def on_root(self, root: Any) -> None:
        import torch

        model = getattr(root, "_orig_mod", root)
        self.root = model
        for path in self.dropins:
            if self.swap:
                self.result.swapped[str(path)] = load_dropin(path).install(model)
            else:
                origin = json.loads((path.parent.parent / "origin.json").read_text())
                self.result.swapped[str(path)] = list(origin.get("paths") or [origin.get("path", "")])
            if self.time_parts and not self.compile_root:  # hooks inside a compiled forward would break its graph
                for sub in self.result.swapped[str(path)]:
                    self._time_part(model.get_submodule(sub) if sub else model, str(path))
        for sub in self.perturb:
            self.handles.append((model.get_submodule(sub) if sub else model).register_forward_hook(
                lambda m, i, o: perturbed(o, self.perturb_state)))
        for dropin in self.perturb_grads:  # what the part's backward returns (apply_perturb.py)
            self.handles += gradient_hooks(model, dropin)
        self.handles.append(model.register_forward_hook(lambda m, i, o: self._first_output(o)))
        if self.compile_root:
            model.forward = torch.compile(model.forward, mode=self.compile_mode)
            self.handles.append(CompiledLoss(self.compile_mode))

    def _first_output(self, output: Any) -> None:
        self.losses.on_output(output)
        if self.result.output is None:
            self.result.output = _clone(output)

    def _time_part(self, module: Any, key: str) -> None:
        import torch

        starts: list[Any] = []

        def pre(m: Any, i: Any) -> None:
            if torch.cuda.is_available() and next(m.parameters(), torch.empty(0)).is_cuda:
                event = torch.cuda.Event(enable_timing=True)
                event.record()
                starts.append(("cuda", event))
            else:
                starts.append(("host", time.perf_counter()))

        def post(m: Any, i: Any, o: Any) -> None:
            if not starts:
                return
            kind, start = starts.pop()
            if kind == "cuda":
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self.forward_ms.setdefault(key, []).append((self.step, start, end))
            else:
                self.forward_ms.setdefault(key, []).append((self.step, (time.perf_counter() - start) * 1e3, None))

        self.handles.append(module.register_forward_pre_hook(pre))
        self.handles.append(module.register_forward_hook(post))

    def on_step(self, i: int) -> None:
        self.step = self.losses.step = i
        if i == self.warmup:
            self.memory.reset()

    def before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.result.grads is None and self.root is not None:
            self.result.grads = {n: p.grad.detach().to("cpu", copy=True) for n, p in self.root.named_parameters()
                                 if p.grad is not None}

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def part_ms(self, warmup: int) -> dict[str, list[float]]:
        """Each timed part's forward ms per step after ``warmup`` (the events read now: the run has synchronized)."""
        out: dict[str, list[float]] = {}
        for key, entries in self.forward_ms.items():
            per_step: dict[int, float] = {}
            for step, start, end in entries:
                if step < warmup:
                    continue
                per_step[step] = per_step.get(step, 0.0) + (start.elapsed_time(end) if end is not None else start)
            out[key] = list(per_step.values())
        return out

    def swap_stats(self) -> dict[str, dict[str, int]]:
        """Per drop-in: how many calls of the swapped forwards ran the kernel and how many the original."""
        out: dict[str, dict[str, int]] = {}
        for path in self.dropins:
            stats = {"kernel": 0, "original": 0}
            for sub in self.result.swapped.get(str(path), []):
                module = self.root.get_submodule(sub) if sub else self.root
                for k, v in getattr(module.__dict__.get("forward"), "kernelpilot_stats", {}).items():
                    stats[k] = stats.get(k, 0) + v
            out[str(path)] = stats
        return out


class CompiledLoss:
    """``torch.nn.functional.cross_entropy`` (``nn.CrossEntropyLoss`` calls it) compiled in the run's mode while
    installed: a loss the script computes after the model's forward is part of the compiled baseline, as it is
    of a head+loss drop-in. Deferred logits (dropin_swap.py) and calls inside a compiled region take the original
    function: the former dispatch to the drop-in, the latter are traced with the region. ``remove`` restores it."""

    def __init__(self, mode: str) -> None:
        import torch
        import torch.nn.functional as F

        self.original = F.cross_entropy
        compiled = torch.compile(self.original, mode=mode)

        # its name and module are the original's: F.cross_entropy hands the global it finds (this wrapper) to a
        # tensor subclass's __torch_function__, and the deferred logits know the function by those
        @functools.wraps(self.original)
        def cross_entropy(*args: Any, **kwargs: Any) -> Any:
            first = args[0] if args else kwargs.get("input")
            if torch.compiler.is_compiling() or type(first) is not torch.Tensor:
                return self.original(*args, **kwargs)
            return compiled(*args, **kwargs)

        F.cross_entropy = cross_entropy

    def remove(self) -> None:
        import torch.nn.functional as F

        F.cross_entropy = self.original


def measure(script: Path, argv: list[str], *, steps: int, warmup: int, dropins: list[Path], compile_root: bool = False,
            seed: int = 0, swap: bool = True, perturb: list[str] | None = None, time_parts: bool = False,
            compile_mode: str = "default", perturb_grads: list[Path] | None = None) -> RunResult:
    """One run; ``swap=False`` installs nothing. ``compile_root``: the model's forward compiled in
    ``compile_mode`` (torch.compile's ``mode``; "default" passes none). ``time_parts`` times the forward of
    each module the drop-ins replace (or would) with CUDA events around it (host clock on the CPU): the hooks
    cost host time, so a run whose step times are compared is never one that times its parts;
    ``perturb`` (module paths) moves every element of those modules' floating outputs by up to one unit in
    the last place of its dtype, at random (``perturbed``): what a kernel that rounds differently, and no
    worse, could change end to end; ``perturb_grads`` (drop-ins) moves the gradients their parts' backward returns
    by up to one ulp too (apply_perturb.gradient_hooks)."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    result = RunResult()
    hooks = _RunHooks(result, dropins, swap=swap, perturb=list(perturb or []), time_parts=time_parts,
                      compile_root=compile_root, warmup=warmup, compile_mode=compile_mode, perturb_grads=perturb_grads)
    hooks.handles.append(register_optimizer_step_pre_hook(hooks.before_optimizer_step))
    _fresh_compile((tuple(map(str, dropins)), swap, tuple(perturb or ()), tuple(map(str, perturb_grads or ())),
                    time_parts, compile_root, compile_mode))
    hooks.memory.start()
    dynamo = DynamoWatch()
    torch.manual_seed(seed)
    try:
        with hooks.losses.watching():
            run = run_script(script, argv, steps=warmup + steps, on_root=hooks.on_root, on_step=hooks.on_step,
                             keep_compile=True)
        result.step_ms = run.step_times_ms()
    except ScriptError as exc:  # the script's own exception, already one line with its file and line
        result.error = exc.summary
    except Exception as exc:  # a swap that breaks the script is reported, not raised
        result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        hooks.remove()
        _sync()
    result.part_ms = hooks.part_ms(warmup)
    result.memory = hooks.memory.read()
    result.losses, result.loss_dtype = hooks.losses.values(len(result.step_ms)) if not result.error else (None, "")
    counts = dynamo.counts()
    result.compiled = counts if compile_root or counts.frames else None
    if hooks.root is not None:
        result.stats = hooks.swap_stats()
    return result


_LAST_RUN: list[Any] = []  # what the previous run in this process swapped, perturbed and timed


def _fresh_compile(config: Any) -> None:
    """Forget torch.compile's compiled code when this run swaps, perturbs or times other modules than the
    previous run in this process. Dynamo keys its cache on the forward's code and guards; on the H200 (torch
    2.11) a swapped model compiled after the unmodified one ran the unmodified graph: its outputs and
    gradients equalled the baseline's bit for bit, and moving a swapped module's outputs by one ulp changed
    nothing end to end."""
    import torch

    if _LAST_RUN and _LAST_RUN[0] != config:
        torch._dynamo.reset()
    _LAST_RUN[:] = [config]


def flat_tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flat_tensors(v)]
    return []


def difference(a: Any, b: Any) -> float:
    """Worst normalized difference ``‖a − b‖ / ‖b‖`` over the tensors of two results (inf if they do
    not match in structure or shape)."""
    import torch

    ta, tb = flat_tensors(a), flat_tensors(b)
    if len(ta) != len(tb) or any(x.shape != y.shape for x, y in zip(ta, tb)):
        return float("inf")
    worst = 0.0
    for x, y in zip(ta, tb):
        if not x.is_floating_point():
            worst = max(worst, 0.0 if torch.equal(x, y) else float("inf"))
            continue
        num = den = 0.0  # in chunks: a language model's logits in float64 at once would take several times their size
        for cx, cy in zip(x.reshape(-1).split(1 << 24), y.reshape(-1).split(1 << 24)):
            den += float(torch.linalg.vector_norm(cy.double())) ** 2
            num += float(torch.linalg.vector_norm(cx.double() - cy.double())) ** 2
        worst = max(worst, num ** 0.5 / (den ** 0.5 or 1.0))
    return worst


def grad_difference(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if a is None or b is None:
        return None
    if set(a) != set(b):
        return float("inf")
    return difference([a[k] for k in sorted(a)], [b[k] for k in sorted(b)])
