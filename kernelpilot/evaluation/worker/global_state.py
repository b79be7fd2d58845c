"""torch's process-wide switches a candidate may change, and putting them back (worker side).

Model-written KernelBench solutions often set ``torch.backends.cudnn.benchmark = True`` or turn on TF32
at import. In one process those switches also change how the reference and the baselines run. The
worker takes a ``Snapshot`` before the candidate is imported (the problem's own default state) and
another after ModelNew is built (the candidate's), lists every difference, runs the reference and the
baselines in the default state and the candidate in its own (``Guarded``: a switch its forward flips is
caught after that call and becomes its state), and restores the default after each candidate. A change that
lowers precision (TF32, reduced-precision reductions, a lower float32 matmul precision, a lower default dtype)
is a finding (``state_findings``).

KernelBench's harness imports ModelNew before running anything, so there the reference runs in the
candidate's state; the KernelBench score reproduces that and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from kernelpilot.rules import Rules
from kernelpilot.verdict import Finding

if TYPE_CHECKING:
    import torch

_PRECISION_ORDER = {"highest": 0, "high": 1, "medium": 2}


@dataclass(frozen=True)
class Snapshot:
    cudnn_enabled: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    cudnn_allow_tf32: bool
    matmul_allow_tf32: bool
    matmul_fp16_reduced: bool
    matmul_bf16_reduced: bool
    float32_matmul_precision: str
    deterministic_algorithms: bool
    deterministic_warn_only: bool
    default_dtype: str
    default_device: str

    @classmethod
    def take(cls) -> "Snapshot":
        import torch

        matmul = torch.backends.cuda.matmul
        device = torch.get_default_device() if hasattr(torch, "get_default_device") else torch.device("cpu")
        return cls(
            cudnn_enabled=bool(torch.backends.cudnn.enabled), cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
            cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
            cudnn_allow_tf32=bool(torch.backends.cudnn.allow_tf32), matmul_allow_tf32=bool(matmul.allow_tf32),
            matmul_fp16_reduced=bool(matmul.allow_fp16_reduced_precision_reduction),
            matmul_bf16_reduced=bool(matmul.allow_bf16_reduced_precision_reduction),
            float32_matmul_precision=str(torch.get_float32_matmul_precision()),
            deterministic_algorithms=bool(torch.are_deterministic_algorithms_enabled()),
            deterministic_warn_only=bool(torch.is_deterministic_algorithms_warn_only_enabled()),
            default_dtype=str(torch.get_default_dtype()).replace("torch.", ""), default_device=str(device))

    def apply(self) -> None:
        import torch

        torch.backends.cudnn.enabled = self.cudnn_enabled
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.backends.cudnn.deterministic = self.cudnn_deterministic
        torch.backends.cudnn.allow_tf32 = self.cudnn_allow_tf32
        matmul = torch.backends.cuda.matmul
        matmul.allow_tf32 = self.matmul_allow_tf32
        matmul.allow_fp16_reduced_precision_reduction = self.matmul_fp16_reduced
        matmul.allow_bf16_reduced_precision_reduction = self.matmul_bf16_reduced
        torch.set_float32_matmul_precision(self.float32_matmul_precision)
        torch.use_deterministic_algorithms(self.deterministic_algorithms, warn_only=self.deterministic_warn_only)
        torch.set_default_dtype(getattr(torch, self.default_dtype))
        if hasattr(torch, "set_default_device"):
            torch.set_default_device(None if self.default_device == "cpu" else self.default_device)

    def changes(self, other: "Snapshot") -> list[str]:
        """What ``other`` sets differently, as ``name: before -> after``."""
        return [f"{f.name}: {getattr(self, f.name)} -> {getattr(other, f.name)}" for f in fields(self)
                if getattr(self, f.name) != getattr(other, f.name)]

    def lowers_precision(self, other: "Snapshot") -> list[str]:
        """The changes in ``other`` that make float computations less precise than in this state."""
        out = []
        for name in ("cudnn_allow_tf32", "matmul_allow_tf32", "matmul_fp16_reduced", "matmul_bf16_reduced"):
            if not getattr(self, name) and getattr(other, name):
                out.append(name)
        mine, theirs = self.float32_matmul_precision, other.float32_matmul_precision
        if _PRECISION_ORDER.get(theirs, 0) > _PRECISION_ORDER.get(mine, 0):
            out.append(f"float32_matmul_precision {other.float32_matmul_precision}")
        if self.default_dtype == "float32" and other.default_dtype in ("float16", "bfloat16"):
            out.append(f"default_dtype {other.default_dtype}")
        return out


@contextmanager
def applied(state: Snapshot) -> Iterator[None]:
    """Run the block in ``state``; the state before it is back afterwards."""
    before = Snapshot.take()
    if before == state:
        yield
        return
    state.apply()
    try:
        yield
    finally:
        before.apply()


class Guarded:
    """The candidate called in its own state, torch's switches checked after every call: what a call changes
    (a forward that turns TF32 or cudnn.benchmark on at its first run) becomes the candidate's state, is listed
    in ``changed`` and is undone after the call, so the reference and the baselines that run next keep the
    problem's own state. About 15 us of host time a call: timing uses it only where the state differs."""

    def __init__(self, fn: Callable[..., Any], state: Snapshot) -> None:
        self.fn, self.state = fn, state
        self.changed: list[Snapshot] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = Snapshot.take()
        if before != self.state:
            self.state.apply()
        try:
            return self.fn(*args, **kwargs)
        finally:
            after = Snapshot.take()
            if after != self.state:
                self.state = after
                self.changed.append(after)
            if after != before:
                before.apply()


def candidate_state(default: Snapshot, model: torch.nn.Module, rules: Rules) -> tuple[Snapshot, list[Finding], Guarded]:
    """torch's global switches as the candidate left them (import and ModelNew): the findings they give,
    and the candidate wrapped (``global_state.Guarded``) to run in its own state while the reference and
    baselines run in the problem's default one (restored here, after each call, and by the worker after
    the evaluation)."""
    mine = Snapshot.take()
    found = state_findings(default, mine, "", rules)
    if mine != default:
        default.apply()
    return mine, found, Guarded(model, mine)


def state_findings(default: Snapshot, mine: Snapshot, when: str, rules: Rules) -> list[Finding]:
    """A ``global-state`` warning for any switch ``mine`` sets differently from ``default``, and
    ``precision-lowered`` for those that lower precision (refused under the default rules)."""
    changes, lowered = default.changes(mine), default.lowers_precision(mine)
    found: list[Finding] = []
    if changes:
        found.append(Finding(rule="global-state", severity="warn", evidence="; ".join(changes), message=(
            f"the candidate changed torch's global state{when} ({'; '.join(changes)}); the reference and the "
            "baselines ran in the problem's own state, the candidate in its own, and the state was restored after it")))
    if lowered:
        found.append(Finding(rule="precision-lowered", severity="warn" if rules.kernelbench else "reject",
                             evidence=", ".join(lowered), message=(
            f"the candidate lowered torch's precision for everything in the process{when} ({', '.join(lowered)}); "
            "compute in lower precision inside the kernel, where the check sees it, not through global switches")))
    return found
