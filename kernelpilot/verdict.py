"""The verdict: what the evaluation engine says about one candidate, as plain JSON.

This module is the contract between the evaluation worker (which fills it), the agent tools (which
summarise it for the model), the TUI and the CLI (which render it) and the transcript (which stores
it). It imports nothing heavy: no torch, no textual.

Schema version rules: add fields freely (readers ignore unknown keys); bump ``SCHEMA_VERSION`` when a
field changes meaning or is removed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Literal, get_args, get_type_hints

SCHEMA_VERSION = 1

# problem_too_large: the problem's own single eager Model call does not fit an empty GPU (nothing about
# the candidate can be said); every other status is about the candidate
# "superseded": a newer save cancelled the evaluation (the pairing loop): no verdict on the candidate, never a failure
Status = Literal["build_error", "runtime_error", "timeout", "incorrect", "rejected", "ok", "problem_too_large",
                 "superseded"]
STATUSES: tuple[str, ...] = get_args(Status)

Severity = Literal["error", "warning", "note"]
Tier = Literal["incorrect", "correct", "faster_than_eager", "faster_than_compile"]


@dataclass
class Diagnostic:
    """One compiler/linker/audit message, located where possible."""

    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    tool: str = ""  # "nvcc", "ptxas", "c++", "ld", "ninja", "python", "policy", "audit"


@dataclass
class KernelResources:
    """ptxas -v figures for one kernel (per architecture)."""

    kernel: str  # demangled where possible
    arch: str = ""
    registers: int | None = None
    shared_bytes: int | None = None
    stack_frame_bytes: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None
    constant_bytes: int | None = None


@dataclass
class BuildReport:
    ok: bool
    seconds: float = 0.0
    rebuilt: list[str] = field(default_factory=list)  # sources recompiled this time
    command: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    kernels: list[KernelResources] = field(default_factory=list)
    log_tail: str = ""  # last lines of raw output, for the engineer
    timed_out: bool = False  # the build was killed at its timeout
    arch: str = ""  # target architecture, e.g. "sm_90" or "sm_90a"
    build_dir: str = ""  # where ninja keeps this candidate lineage's objects
    pch: str = ""  # what the precompiled header did for each C++ source (evaluation/build/pch.py)
    cache: str = ""  # "hit" when an identical single-file candidate was already built (nothing ran)
    # A device-only build (a kernel edit's cubins loaded into the last full build): its kernels compared with a
    # full build of the same files: "same (N kernels)", "differs: ...", "pending", "not checked (why)"; "" for a
    # full build.
    sass_check: str = ""


@dataclass
class TrialResult:
    """One correctness trial: fresh inputs from one distribution, one run order."""

    seed: int
    distribution: str  # "normal", "uniform", "scaled", ...
    order: str  # "candidate_first" | "reference_first"
    shape_set: str = "default"  # "default" or the name of an extra shape set from config
    passed: bool = False
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    normalized_error: float | None = None  # ||out - ref64|| / ||ref64||
    reference_normalized_error: float | None = None  # the problem dtype reference vs fp64
    mismatched: int = 0  # elements outside atol + rtol*|ref|
    total: int = 0
    message: str = ""


@dataclass
class Correctness:
    passed: bool = False
    atol: float | None = None
    rtol: float | None = None
    max_normalized_error: float | None = None  # threshold on ||out-ref||/||ref||
    trials: list[TrialResult] = field(default_factory=list)
    deterministic: bool | None = None
    inputs_unmodified: bool | None = None
    # an output was an input's storage where the reference's is a new tensor (written in place, or the input
    # handed back): False when seen (inputs_unmodified is then False too)
    outputs_own_storage: bool | None = None
    fully_written: bool | None = None
    # no write past a tensor's end in the guarded calls (correctness/bounds.py); None: not checked
    in_bounds: bool | None = None
    discriminates: bool | None = None  # a zero / constant output fails this problem's check
    notes: list[str] = field(default_factory=list)
    weights: str = ""  # how ModelNew's weights were made Model's: "by name" (copied) or "by seed"
    references_cached: int = 0  # trials whose reference outputs the warm worker had kept (reference_cache.py)
    # torch.compile's own output put through this same check (correctness/compiled_check.py): "passed", "failed:
    # why"; "" when torch.compile was not run (test mode, or no benchmark yet)
    compiled_check: str = ""


@dataclass
class Finding:
    """One audit (anti-cheat / policy) finding."""

    rule: str  # stable id, e.g. "torch-compute-op", "side-stream", "timer-patch"
    message: str  # plain words for the engineer and the model
    severity: Literal["reject", "warn"] = "reject"
    file: str | None = None
    line: int | None = None
    evidence: str = ""  # the offending source line or op name


@dataclass
class Timing:
    """Timings of one implementation in milliseconds, per call."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    samples: int
    host_median_ms: float | None = None  # host clock around call + full device sync
    # CUDA-event time of calls made on an idle GPU: includes the host's launch overhead (Python,
    # dispatch, guards), which median_ms excludes by queueing each timed call behind a GPU spin
    launch_median_ms: float | None = None
    round_medians_ms: list[float] = field(default_factory=list)  # for the noise estimate

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


@dataclass
class Performance:
    candidate: Timing | None = None
    eager: Timing | None = None
    compiled: Timing | None = None
    compile_mode: str = "default"
    cuda_graphs: bool = False
    l2_flushed: bool = True
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    # why there is no torch.compile time ("" when there is one): the verdict's summary says it too, and a
    # suite counts such a verdict as not faster than torch.compile
    compiled_missing: str = ""
    # where the eager and torch.compile times come from: "interleaved" (timed beside this candidate) or
    # "shared" (measured once for the problem on this GPU in this run, the eager time re-timed beside it)
    baseline_source: str = "interleaved"
    noise_pct: float | None = None  # spread of round medians, percent of median
    tier: Tier = "incorrect"
    # what each timed call ran: "forward", or "forward+backward" for a training drop-in (its ModelNew defines
    # backward: evaluation/timing/training.py)
    timed: str = "forward"


ROOFLINE_MARGIN = 0.05  # how far under the roofline's floor a time may be before it is flagged
# what every view says of such a time, in place of a share of speed of light
ABOVE_ROOFLINE = ("faster than the roofline allows: the candidate does less work than the problem as written, or not "
                  "all of it is timed")


@dataclass
class SpeedOfLight:
    bytes_moved: int | None = None
    flops: int | None = None
    bound: Literal["memory", "compute", "unknown"] = "unknown"
    floor_ms: float | None = None  # the roofline time at measured ceilings
    achieved_tbps: float | None = None
    achieved_tflops: float | None = None
    pct_of_ceiling: float | None = None  # of the bound that applies
    ceiling_tbps: float | None = None
    ceiling_tflops: float | None = None
    ceiling_source: str = ""  # "measured <date> on <gpu>" or "datasheet"
    compiled_pct_of_ceiling: float | None = None

    def above_roofline(self) -> bool:
        """Faster than the roofline allows (beyond ROOFLINE_MARGIN): such a figure is no share of speed of light;
        the candidate does less work than the problem as written, or not all of it is timed (the verdict's flag)."""
        return self.pct_of_ceiling is not None and self.pct_of_ceiling > 100.0 * (1 + ROOFLINE_MARGIN)

    def pct_words(self) -> str:
        """``N% of speed of light``, or, above the roofline, that it is faster than the roofline allows."""
        if self.pct_of_ceiling is None:
            return ""
        if self.above_roofline():
            return f"{self.pct_of_ceiling:.0f}% of speed of light: faster than the roofline allows (see the flag)"
        return f"{self.pct_of_ceiling:.0f}% of speed of light"


@dataclass
class KernelBenchScore:
    """KernelBench's own verdict on the candidate (rule sets kernelbench, kernelbench-v0.1), reproduced in
    our worker beside ours: its precision cast, seeds, trials, allclose tolerance and CUDA-event timing."""

    preset: str = ""  # "current" | "v0.1"
    commit: str = ""
    precision: str = "fp32"
    tolerance: float | None = None
    # "correct", "incorrect", "runtime_error", "compile_error" (KernelBench's compiled=False), or "not_run"
    # (refused before running by our static policy: process creation, native loaders, sockets)
    status: str = "not_run"
    compiled: bool = False
    correctness: bool = False
    trials: str = ""  # "(5 / 5)"
    max_difference: list[str] = field(default_factory=list)
    avg_difference: list[str] = field(default_factory=list)
    runtime_ms: float | None = None  # mean, 3 significant figures, as KernelBench stores it
    ref_runtime_ms: float | None = None  # the reference timed the same way, on this GPU, in this run
    speedup: float | None = None
    excessive_speedup: bool = False  # KernelBench's flag above 10x (a flag, not a failure)
    error: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Attempt:
    """An earlier attempt at the same evaluation whose worker died (it was retried in a fresh worker)."""

    status: str
    error: str = ""
    phase: str = ""  # where the worker died: "import", "first call", ...
    worker_died: bool = True


@dataclass
class MemoryReport:
    """GPU memory when a verdict is an out-of-memory error: what the harness held, what was asked for."""

    engine_held_bytes: int | None = None  # allocated by the harness (inputs, references, baselines) at the call
    requested_bytes: int | None = None  # the allocation that failed ("Tried to allocate ...")
    device_total_bytes: int | None = None
    device_free_bytes: int | None = None  # free on the device when the harness saw the error
    phase: str = ""


@dataclass
class Environment:
    gpu: str = ""
    sm: str = ""  # "sm_90"
    driver: str = ""
    torch: str = ""
    cuda: str = ""
    python: str = ""
    hostname_hash: str = ""
    confinement: list[str] = field(default_factory=list)  # e.g. ["env-scrubbed", "landlock-abi7", "netns"]
    relaxed_rules: list[str] = field(default_factory=list)  # policy rules the project relaxed


@dataclass
class Verdict:
    status: Status
    problem: str = ""
    candidate: str = ""
    mode: str = "benchmark"  # "build" | "test" | "benchmark"
    summary: str = ""  # one line for humans and the model
    schema_version: int = SCHEMA_VERSION
    build: BuildReport | None = None
    correctness: Correctness | None = None
    findings: list[Finding] = field(default_factory=list)
    performance: Performance | None = None
    speed_of_light: SpeedOfLight | None = None
    flags: list[str] = field(default_factory=list)  # suspicion flags in plain words
    environment: Environment = field(default_factory=Environment)
    error: str = ""  # runtime error / timeout message
    seconds: float = 0.0  # wall time of the whole evaluation
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step: build, verify, timing, ...
    # [start, end] of the worker's request, Unix seconds on the worker's own clock (busy share of a GPU)
    worker_window: list[float] = field(default_factory=list)
    created_at: str = ""  # ISO 8601 UTC
    # a worker that died during the candidate's import or first call is replaced and the evaluation run
    # again once: the earlier attempts, and whether the candidate died once and then passed
    attempts: list[Attempt] = field(default_factory=list)
    flaky: bool = False
    memory: MemoryReport | None = None  # out of memory: who held what
    kernelbench: KernelBenchScore | None = None  # under a KernelBench preset: KernelBench's own score

    # ---- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        return _from_dict(cls, data)

    @classmethod
    def from_json(cls, text: str) -> "Verdict":
        return cls.from_dict(json.loads(text))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def engine_crash(self) -> bool:
        """A worker died on this candidate and the candidate then ran in a fresh worker without dying:
        the death was the harness's, not the candidate's (counted as a crash of ours, retried or not)."""
        return any(a.worker_died for a in self.attempts) and not worker_death(self.error)


def worker_death(error: str) -> bool:
    """Whether a verdict's error says its worker process died (a signal or an unexpected exit)."""
    return "the worker was killed by" in error or "the worker exited with status" in error


def from_plain(cls: type, data: Any) -> Any:
    """A verdict part (BuildReport, Performance, ...) from its ``asdict`` form; unknown keys are ignored."""
    return _from_dict(cls, data)


def _from_dict(cls: type, data: Any) -> Any:
    """Rebuild nested dataclasses from plain dicts, ignoring unknown keys."""
    if not is_dataclass(cls) or not isinstance(data, dict):
        return data
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        kwargs[f.name] = _coerce(hints[f.name], data[f.name])
    return cls(**kwargs)


def _coerce(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = getattr(tp, "__origin__", None)
    args = get_args(tp)
    if origin is list and args:
        return [_coerce(args[0], v) for v in value]
    if args and origin is not Literal:  # Optional[X] / X | None
        for a in args:
            if is_dataclass(a):
                return _from_dict(a, value)
        return value
    if is_dataclass(tp):
        return _from_dict(tp, value)
    return value


def tier_for(speedup_vs_eager: float | None, speedup_vs_compile: float | None, correct: bool) -> Tier:
    """Correct; >5% faster than eager; >5% faster than torch.compile."""
    if not correct:
        return "incorrect"
    if speedup_vs_compile is not None and speedup_vs_compile > 1.05:
        return "faster_than_compile"
    if speedup_vs_eager is not None and speedup_vs_eager > 1.05:
        return "faster_than_eager"
    return "correct"
