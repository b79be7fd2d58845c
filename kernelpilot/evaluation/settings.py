"""How an evaluation runs: trials, tolerances, timing, the watchdog's allowances, limits, rules.

Tolerances (``EvalSettings.tolerances``, from the project config; defaults in kernelpilot.config):
fp32 atol = rtol = 1e-4 (KernelBench's current value) with a normalised-error bound of 1e-5, which
allows the ~1e-6 an fp32 kernel with another summation order shows but refuses bf16/TF32 arithmetic
(~1e-3); bf16 1e-2 / 1e-2 with normalised 1e-2 (bf16 rounds at 2^-8 ~ 3.9e-3, so one or two ulps
pass); fp16 1e-2 / 1e-2 with normalised 2e-3 (three more mantissa bits than bf16). The normalised
bound is raised to twice the problem-dtype reference's own error against float64 when that is larger,
so a kernel at least as accurate as PyTorch always passes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.rules import Rules

if TYPE_CHECKING:
    from kernelpilot.config import ProjectConfig



def _default_tolerances() -> dict[str, tuple[float, float]]:
    from kernelpilot.config import DEFAULT_TOLERANCES

    return dict(DEFAULT_TOLERANCES)


def _default_normalized() -> dict[str, float]:
    from kernelpilot.config import DEFAULT_MAX_NORMALIZED_ERROR

    return dict(DEFAULT_MAX_NORMALIZED_ERROR)


@dataclass(frozen=True)
class EvalSettings:
    trials: int = 5
    distributions: list[str] = field(default_factory=lambda: ["normal", "uniform", "scaled"])
    tolerances: dict[str, tuple[float, float]] = field(default_factory=_default_tolerances)
    max_normalized_error: dict[str, float] = field(default_factory=_default_normalized)
    extra_shapes: list[dict[str, Any]] = field(default_factory=list)
    allowed_libraries: list[str] = field(default_factory=list)
    relaxed_policy: list[str] = field(default_factory=list)
    compile_mode: str = "default"
    compile_baseline: bool = True
    cuda_graphs: bool = False
    seed: int = 42
    # timing
    warmup: int = 5
    rounds: int = 5
    samples_per_round: int = 20
    # seconds of timed calls per implementation at most: a problem whose one call takes longer than
    # time_budget_s / (rounds x samples_per_round) gets fewer samples a round (never fewer than 4), so a
    # 80 ms model is timed 20 times, not 100; 0 turns the budget off
    time_budget_s: float = 1.5
    input_pool: int = 4
    replay_checks: int = 8
    flush_bytes: int | None = None  # default: max(2 x L2, 256 MiB)
    host_gap_threshold: float = 0.2
    small_numel: int = 4096  # torch compute ops on smaller tensors are warnings, not rejections
    # the scoring rules by name (kernelpilot.rules.RULESETS: kernelpilot, kernelbench, kernelbench-v0.1);
    # ``ruleset`` is the type every layer asks
    rules: str = "kernelpilot"
    kb_precision: str = "fp32"  # a KernelBench preset's harness precision (fp32, fp16, bf16)
    # the hang watchdog (watchdog.py): each call into candidate code may take call_floor_s plus call_multiple
    # times one eager reference call; the candidate's first call gets first_call_s more
    call_floor_s: float = 5.0
    call_multiple: float = 100.0
    first_call_s: float = 10.0
    import_timeout_s: float = 30.0
    # limits (seconds): a build; a whole test / benchmark request (the watchdog usually acts long before)
    build_timeout_s: float = 300.0
    start_timeout_s: float = 180.0
    test_timeout_s: float = 300.0
    benchmark_timeout_s: float = 900.0
    # process
    device: str = "cuda"  # "cpu" only for tests of the engine itself
    # bytes of NaN blocks the caching allocator is refilled with before a candidate runs (at least 64 MiB)
    poison_bytes: int = 0
    confine: bool = True
    build_dir: str | None = None

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise KernelpilotError(f"trials must be at least 1 (got {self.trials}); set trials = 5 in the config.")
        bad = [d for d in self.distributions if d not in ("normal", "uniform", "scaled", "native")]
        if bad or not self.distributions:
            raise KernelpilotError(f"unknown input distribution {bad or '[]'}; use normal, uniform, scaled or native.")
        harness = self.ruleset.harness  # raises for an unknown name, with the names to use
        if harness is not None and self.kb_precision not in harness.precisions:
            raise KernelpilotError(f"{self.rules} scores in {', '.join(harness.precisions)}, "
                                   f"not {self.kb_precision!r}; pass --kb-precision with one of those.")

    @property
    def ruleset(self) -> "Rules":
        from kernelpilot.rules import get_rules

        return get_rules(self.rules)

    @classmethod
    def from_config(cls, config: ProjectConfig, **overrides: Any) -> "EvalSettings":
        values: dict[str, Any] = {}
        for name in ("trials", "extra_shapes", "allowed_libraries", "relaxed_policy", "compile_mode", "cuda_graphs"):
            if getattr(config, name, None) is not None:
                values[name] = getattr(config, name)
        tol = _default_tolerances()
        tol.update({k: tuple(v) for k, v in (getattr(config, "tolerances", None) or {}).items()})
        norm = _default_normalized()
        norm.update(getattr(config, "max_normalized_error", None) or {})
        values["tolerances"], values["max_normalized_error"] = tol, norm
        timeout = getattr(config, "timeout_s", None)
        if timeout:
            values["build_timeout_s"] = values["test_timeout_s"] = float(timeout)
            values["benchmark_timeout_s"] = max(float(timeout), 900.0)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalSettings":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def settings_of(message: dict[str, Any]) -> EvalSettings:
    """The settings a worker request carries (its ``settings``, as ``EvalSettings.to_dict`` wrote them)."""
    return EvalSettings.from_dict(message.get("settings") or {})
