"""`hotspots --group module`: the model's modules by inclusive time, forward and backward apart.

Forward time of a module call is the time of every ATen call made while it was on the module stack
(children included); backward time is the time of every backward ATen call run by an autograd node
that the module's forward created (or one of its children's). Calls of one class with the same
parameter shapes and argument shapes are one row (``x32``), at the depth asked for (the root is
depth 0, ``layers.3.mlp`` depth 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelpilot.profiling.records import ModuleCall
from kernelpilot.profiling.trace import Trace


@dataclass
class ModuleGroup:
    cls: str
    signature: str  # argument shapes
    param_signature: str
    paths: list[str] = field(default_factory=list)
    calls: list[ModuleCall] = field(default_factory=list)
    forward_ms: float = 0.0  # summed over the recorded steps
    backward_ms: float = 0.0

    @property
    def count(self) -> int:
        return len(self.paths)

    @property
    def total_ms(self) -> float:
        return self.forward_ms + self.backward_ms

    def label(self) -> str:
        return _compress(self.paths)


def depth_of(path: str) -> int:
    return 0 if path == "" else path.count(".") + 1


def _ancestors(path: str) -> list[str]:
    if path == "":
        return [""]
    parts = path.split(".")
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _param_signature(trace: Trace, path: str) -> str:
    prefix = f"{path}." if path else ""
    names = sorted(n for n in trace.param_specs if n.startswith(prefix))
    return ";".join(f"{n[len(prefix):]}:{trace.param_specs[n].spec.key()}" for n in names)


def module_groups(trace: Trace, *, depth: int, steps: list[int] | None = None) -> list[ModuleGroup]:
    """Rows for modules of depth 1..``depth`` (the root alone when it has no children), heaviest first."""
    wanted = set(steps) if steps is not None else None
    forward: dict[tuple[str, int], float] = {}
    backward: dict[str, float] = {}
    for op in trace.ops:
        if wanted is not None and op.step not in wanted:
            continue
        if op.phase == "backward" and op.stack:
            for path in _ancestors(op.stack[-1]):
                backward[path] = backward.get(path, 0.0) + op.ms
    calls = [c for c in trace.calls if (wanted is None or c.step in wanted) and c.last_op >= 0]
    for c in calls:
        forward[(c.path, c.first_op)] = sum(trace.ops[i].ms for i in range(c.first_op, c.last_op)
                                            if trace.ops[i].phase == "forward")
    groups: dict[tuple[str, str, str], ModuleGroup] = {}
    seen_paths: dict[tuple[str, str, str], set[str]] = {}
    param_sig: dict[str, str] = {}
    for c in calls:
        if depth_of(c.path) > depth or (c.path == "" and depth > 0):
            continue
        ps = param_sig.setdefault(c.path, _param_signature(trace, c.path))
        key = (c.cls, c.signature(), ps)
        group = groups.setdefault(key, ModuleGroup(c.cls, c.signature(), ps))
        group.calls.append(c)
        group.forward_ms += forward[(c.path, c.first_op)]
        paths = seen_paths.setdefault(key, set())
        if c.path not in paths:
            paths.add(c.path)
            group.paths.append(c.path)
    for key, group in groups.items():
        # backward time is known per path, not per call: shared among the path's groups by forward calls
        for path in group.paths:
            same_path = [g for g in groups.values() if path in g.paths]
            total_calls = sum(sum(1 for c in g.calls if c.path == path) for g in same_path) or 1
            mine = sum(1 for c in group.calls if c.path == path)
            group.backward_ms += backward.get(path, 0.0) * mine / total_calls
    return sorted(groups.values(), key=lambda g: g.total_ms, reverse=True)


def _compress(paths: list[str]) -> str:
    """``layers.0.mlp``, ``layers.1.mlp`` … -> ``layers.{0..31}.mlp``; a single path as it is."""
    if not paths:
        return ""
    shown = [p or "<root>" for p in paths]
    if len(shown) == 1:
        return "model." + shown[0] if shown[0] != "<root>" else "model"
    parts = [p.split(".") for p in shown]
    if len({len(p) for p in parts}) == 1:
        differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
        if len(differ) == 1 and all(p[differ[0]].isdigit() for p in parts):
            i = differ[0]
            nums = sorted(int(p[i]) for p in parts)
            span = (f"{{{nums[0]}..{nums[-1]}}}" if nums == list(range(nums[0], nums[-1] + 1))
                    else "{" + ",".join(map(str, nums)) + "}")
            return "model." + ".".join([*parts[0][:i], span, *parts[0][i + 1:]])
    return "model." + shown[0] + f" (+{len(shown) - 1} more)"


def module_table(groups: list[ModuleGroup], *, steps: int, step_ms: float, clock: str, top: int = 15) -> str:
    """The ranked table; times per step, share of an uninstrumented step of ``step_ms``."""
    per = max(steps, 1)
    lines = [f"{'#':>3}  {'fwd ms':>9}  {'bwd ms':>9}  {'% step':>6}  {'n':>4}  module (class) [arguments]   "
             f"({clock}; per step, {steps} step(s); step {step_ms:.3f} ms uninstrumented)"]
    for i, g in enumerate(groups[:top], 1):
        share = 100 * g.total_ms / per / step_ms if step_ms > 0 else 0.0
        count = f"x{g.count}" if g.count > 1 else ""
        lines.append(f"{i:>3}  {g.forward_ms / per:9.3f}  {g.backward_ms / per:9.3f}  {share:6.1f}  {count:>4}  "
                     f"{g.label()} ({g.cls}) [{g.signature}]")
    return "\n".join(lines)


def outside_modules(trace: Trace, *, steps: list[int], step_ms: float) -> str:
    """What the step spends outside the model's modules, per step: the optimizer's step() and the script's other
    calls (a loss computed after the forward, its backward, gradients cleared); "" when none was recorded."""
    wanted, per = set(steps), max(len(steps), 1)
    optimizer = rest = 0.0
    for op in trace.ops:
        if op.step not in wanted:
            continue
        if op.phase == "optimizer":
            optimizer += op.ms
        elif op.phase == "other" or (op.phase == "backward" and not op.stack):
            rest += op.ms

    def share(ms: float) -> str:
        return f"{100 * ms / per / step_ms:.1f}% of the step" if step_ms > 0 else "share unknown"

    lines = []
    if optimizer > 0:
        lines.append(f"outside the model: the optimizer's step() {optimizer / per:.3f} ms per step "
                     f"({share(optimizer)})")
    if rest > 0:
        lines.append(f"outside the model: the script's other calls (loss, its backward, zero_grad) {rest / per:.3f} "
                     f"ms per step ({share(rest)})")
    return "\n".join(lines)
