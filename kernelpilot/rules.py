"""The scoring rules: one type, asked by every layer (static policy, worker, audit, suite, report).

A rule set says what is refused before anything runs, what PyTorch code inside ``ModelNew.forward``
and what library kernels it runs mean, and, for a KernelBench preset, how KernelBench's own harness
scores the candidate (its precision cast, seeds, trials, tolerances and timing), so that one evaluation
gives both scores: KernelBench's and ours.

- ``kernelpilot`` (the default): the static policy refuses what it flags; PyTorch compute ops in
  forward and library kernels (cuBLAS, cuDNN) are refused unless the project allows them.
- ``kernelbench``: KernelBench's current batch scorer (``scripts/eval_from_generations.py`` ->
  ``src/kernelbench/eval.py``). Our static findings are listed but refuse nothing by themselves,
  except code that creates processes, loads native libraries or opens sockets; PyTorch ops and
  library kernels are warnings; our runtime evidence decides our status.
- ``kernelbench-v0.1``: the same for the v0.1 harness most published results used (fp32 tolerance
  1e-2, no L2 flush, no discarded first trial, no device sync before each timed trial).

Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kernelpilot.errors import KernelpilotError

Severity = Literal["reject", "warn"]

# KernelBench commits the presets follow (ScalingIntelligence/KernelBench)
KERNELBENCH_MAIN = "423217d"  # main, 2026-03-05: eval.py with per-precision tolerances (PR #80), timing.py
KERNELBENCH_V01 = "129232e"  # branch v0.1, 2025-07-21


@dataclass(frozen=True)
class KernelBenchHarness:
    """How one version of KernelBench's harness scores a candidate (what the worker reproduces)."""

    version: str
    commit: str
    tolerances: dict[str, float]  # precision -> atol = rtol
    trials: int = 5  # correctness trials (every script passes 5)
    seed: int = 42  # torch.manual_seed(42), then one randint(0, 2**32 - 1) seed per trial
    perf_trials: int = 100
    warmup: int = 3
    discard_first: int = 1
    l2_flush: bool = True  # a 256 MiB int64 buffer written before each timed trial
    sync_before_trial: bool = True  # torch.cuda.synchronize() before each trial's start event
    cast_inputs: bool = True  # every input tensor .to(precision), integer ones included (KernelBench #151)
    excessive_speedup: float = 10.0  # flagged, not failed
    precisions: tuple[str, ...] = ("fp32", "fp16", "bf16")

    def tolerance(self, precision: str) -> float:
        if precision not in self.tolerances:
            raise KernelpilotError(f"KernelBench {self.version} has no tolerance for {precision!r}; use one of "
                                   f"{', '.join(sorted(self.tolerances))}.")
        return self.tolerances[precision]


# Static rule ids that refuse before running under a KernelBench preset: process creation, native
# loaders and sockets (KernelBench accepts the rest; our runtime checks judge them).
KB_REFUSED_STATIC: frozenset[str] = frozenset({
    "import-subprocess", "import-pty", "import-socket", "import-ssl", "import-http", "import-urllib",
    "import-requests", "import-ctypes", "import-cffi", "import-multiprocessing", "process-creation",
    "native-dlopen", "native-process", "native-network", "torch-escape", "dunder-import", "import-importlib",
})


@dataclass(frozen=True)
class Rules:
    name: str
    summary: str
    harness: KernelBenchHarness | None = None
    refused_static: frozenset[str] = field(default_factory=frozenset)  # under a preset: what still refuses

    @property
    def kernelbench(self) -> bool:
        return self.harness is not None

    def static_severity(self, rule: str, flagged: Severity = "reject") -> Severity:
        """The severity of a static finding with this rule id (``flagged``: what the policy says)."""
        if flagged == "warn" or not self.kernelbench:
            return flagged
        return "reject" if rule in self.refused_static else "warn"

    def torch_op_severity(self, small: bool) -> Severity:
        """A PyTorch compute op in ModelNew.forward (``small``: it only touched small tensors)."""
        return "warn" if self.kernelbench or small else "reject"

    def library_kernel_severity(self) -> Severity:
        """A library kernel (cuBLAS, cuDNN) that no allowed library explains."""
        return "warn" if self.kernelbench else "reject"

    def describe(self) -> str:
        return f"{self.name}: {self.summary}"


RULESETS: dict[str, Rules] = {
    "kernelpilot": Rules(
        "kernelpilot", "the static policy refuses what it flags; PyTorch ops and library kernels in forward are "
        "refused unless allowed_libraries names them"),
    "kernelbench": Rules(
        "kernelbench", f"KernelBench's batch scorer at {KERNELBENCH_MAIN} (fp32 atol = rtol = 1e-4, fp16/bf16 1e-2, "
        "5 seeded trials, CUDA events with L2 flush); our findings listed, our runtime checks decide our status",
        KernelBenchHarness("current", KERNELBENCH_MAIN, {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}),
        KB_REFUSED_STATIC),
    "kernelbench-v0.1": Rules(
        "kernelbench-v0.1", f"KernelBench v0.1 ({KERNELBENCH_V01}: fp32 atol = rtol = 1e-2, CUDA events without L2 "
        "flush), the version most published results used",
        KernelBenchHarness("v0.1", KERNELBENCH_V01, {"fp32": 1e-2}, discard_first=0, l2_flush=False,
                           sync_before_trial=False, cast_inputs=False, precisions=("fp32",)),
        KB_REFUSED_STATIC),
}
RULE_NAMES: tuple[str, ...] = tuple(RULESETS)


def get_rules(name: str | Rules | None) -> Rules:
    if isinstance(name, Rules):
        return name
    key = (name or "kernelpilot").strip().lower()
    if key not in RULESETS:
        raise KernelpilotError(f"unknown scoring rules {name!r}; use one of {', '.join(RULE_NAMES)}.")
    return RULESETS[key]
