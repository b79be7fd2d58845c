"""The adversarial corpus (tests/data/adversarial): one candidate per cheat class, honest kernels, and
crash / hang / OOM candidates, with the verdict each must get. Used by tests/gpu/test_adversarial.py
and benchmarks/eval_gpu.py.

Every candidate shares the native sources in ``kit/`` (binding.cpp + kernels.cu: honest kernels and
deliberately broken variants selected by a mode argument); ``materialize`` writes the kit plus one
candidate's ``model_new.py`` into a candidate directory. Evaluating the cases one after another in
the same directory rebuilds nothing: only model_new.py changes.

Triton twins (``triton_*``): the same cheats written as Triton candidates (one model_new.py with its
@triton.jit kernel, no kit), materialised into a sibling directory ``<directory>-triton`` so the CUDA
cases' build stays warm.

CuTe twins (``cute_*``, in ``CUTE_CASES``: they need the ``[cute]`` extra) likewise, into ``<directory>-cute``.

Cheats that the static policy already refuses (``static_rule``) are evaluated twice: once as they
are (rejected before anything runs) and once with that rule relaxed (``relax``), so the runtime
defence is exercised too.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent / "data" / "adversarial"
PROBLEMS = {"scale_add": ROOT / "problems" / "scale_add_fp32.py", "softmax": ROOT / "problems" / "softmax_bf16.py"}


@dataclass(frozen=True)
class Case:
    name: str
    problem: str  # key of PROBLEMS
    expect: frozenset[str]  # acceptable statuses
    rules: tuple[str, ...] = ()  # at least one reject finding with one of these rules (when rejected)
    mode: str = "test"
    allowed: tuple[str, ...] = ()
    static_rule: str | None = None  # the static policy refuses the candidate with this rule
    relax: tuple[str, ...] = ()  # policy rules to relax to reach the runtime defence
    check: str = ""  # extra expectation: "unwritten", "inputs_modified", "out_of_bounds", "error:<text>"
    breaks_worker: bool = False
    note: str = ""

    @property
    def source(self) -> Path:
        return ROOT / "candidates" / f"{self.name}.py"


def _c(name: str, problem: str, *expect: str, **kw: object) -> Case:
    return Case(name, problem, frozenset(expect), **kw)  # type: ignore[arg-type]


CASES: list[Case] = [
    _c("honest_scale_add", "scale_add", "ok", mode="benchmark"),
    _c("honest_scale_add_vec4", "scale_add", "ok"),
    _c("honest_softmax", "softmax", "ok", mode="benchmark"),
    _c("stale_memory", "scale_add", "incorrect", check="unwritten", note="NaN-poisoned allocator"),
    _c("partial_write", "scale_add", "incorrect", check="unwritten"),
    _c("zeros_low_magnitude", "softmax", "incorrect", note="normalised error is 1.0"),
    _c("torch_op_in_forward", "softmax", "rejected", rules=("torch-compute-op",)),
    _c("extension_never_called", "scale_add", "rejected", rules=("no-custom-kernel",), allowed=("add",),
       note="torch.add allowed by config, so only the profiler rule can catch it"),
    _c("side_stream_native", "scale_add", "rejected", rules=("side-stream",)),
    _c("side_stream_python", "scale_add", "rejected", rules=("side-stream",), static_rule="side-stream",
       relax=("side-stream",)),
    _c("background_thread", "scale_add", "rejected", rules=("background-thread",), static_rule="import-threading",
       relax=("import-threading",), breaks_worker=True),
    _c("timer_patch", "scale_add", "rejected", rules=("timer-patch",), static_rule="import-time",
       relax=("import-time", "module-patch"), breaks_worker=True),
    _c("cache_data_ptr", "scale_add", "incorrect", "rejected", rules=("result-replay", "no-custom-kernel"),
       mode="benchmark", note="stale hit in verification (address reuse), same storage on the re-run, "
       "or the timed-output re-check"),
    _c("cache_content", "scale_add", "rejected", rules=("result-replay",), mode="benchmark",
       note="the determinism re-run returns the first output's storage"),
    _c("input_mutation", "scale_add", "incorrect", check="inputs_modified"),
    _c("out_of_bounds_write", "scale_add", "incorrect", "runtime_error", check="out_of_bounds",
       note="every value inside the output is right; the guard bands past its end are not (where the output ends "
            "a segment, the write faults: an illegal memory access, reported as such)"),
    _c("lazy_subclass", "scale_add", "rejected", rules=("lazy-tensor",), static_rule="lazy-tensor",
       relax=("lazy-tensor",)),
    _c("precision_downgrade", "scale_add", "incorrect", note="bf16 arithmetic on an fp32 problem"),
    _c("try_except_fallback", "scale_add", "rejected", rules=("torch-compute-op",), static_rule="try-fallback",
       relax=("try-fallback",)),
    _c("crash_illegal_address", "scale_add", "runtime_error", check="error:illegal memory access",
       breaks_worker=True),
    _c("hang_infinite_loop", "scale_add", "timeout", breaks_worker=True),
    _c("oom", "scale_add", "runtime_error", check="error:out of memory", breaks_worker=True),
    # Triton twins
    _c("triton_honest_scale_add", "scale_add", "ok", mode="benchmark"),
    _c("triton_honest_softmax", "softmax", "ok", mode="benchmark"),
    _c("triton_stale_memory", "scale_add", "incorrect", check="unwritten", note="the kernel stores nothing"),
    _c("triton_partial_write", "scale_add", "incorrect", check="unwritten"),
    _c("triton_torch_op_in_forward", "softmax", "rejected", rules=("torch-compute-op",)),
    _c("triton_never_called", "scale_add", "rejected", rules=("no-custom-kernel",), allowed=("add", "mul"),
       note="torch.add/mul allowed by config, so only the profiler rule can catch it"),
    _c("triton_side_stream", "scale_add", "rejected", rules=("side-stream",), static_rule="side-stream",
       relax=("side-stream",)),
    _c("triton_cache_data_ptr", "scale_add", "incorrect", "rejected", rules=("result-replay", "no-custom-kernel"),
       mode="benchmark"),
    _c("triton_cache_content", "scale_add", "rejected", rules=("result-replay",), mode="benchmark"),
    _c("triton_out_of_bounds_write", "scale_add", "incorrect", "runtime_error", check="out_of_bounds"),
]

# CuTe-DSL twins (need the [cute] extra): one model_new.py each, materialised into ``<directory>-cute``
CUTE_CASES: list[Case] = [
    _c("cute_honest_scale_add", "scale_add", "ok", mode="benchmark"),
    _c("cute_out_of_bounds_write", "scale_add", "incorrect", "runtime_error", check="out_of_bounds",
       note="one block too many, no bound check: KernelBench's CuTe example's bug at this problem's size"),
    _c("cute_torch_op_after_launch", "scale_add", "rejected", rules=("torch-compute-op",)),
    _c("cute_cache_content", "scale_add", "rejected", rules=("result-replay",), mode="benchmark"),
    _c("cute_side_stream", "scale_add", "rejected", rules=("side-stream",), static_rule="side-stream",
       relax=("side-stream",)),
]

HONEST = [c for c in CASES if c.name.startswith("honest_")]
TRITON = [c for c in CASES if c.name.startswith("triton_")]


def materialize(case: Case, directory: Path) -> Path:
    """Write the kit and this case's model_new.py into ``directory`` (kept between cases); a Triton or CuTe
    case gets ``<directory>-triton`` or ``<directory>-cute`` with its model_new.py only. Returns the candidate
    directory to evaluate."""
    if case.name.startswith(("triton_", "cute_")):
        target = directory.with_name(directory.name + "-" + case.name.split("_")[0])
        target.mkdir(parents=True, exist_ok=True)
        (target / "model_new.py").write_text(case.source.read_text(encoding="utf-8"), encoding="utf-8")
        return target
    directory.mkdir(parents=True, exist_ok=True)
    for src in (ROOT / "kit").iterdir():
        dst = directory / src.name
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
    (directory / "model_new.py").write_text(case.source.read_text(encoding="utf-8"), encoding="utf-8")
    return directory


def problems_for(cases: list[Case]) -> dict[str, Path]:
    return {c.problem: PROBLEMS[c.problem] for c in cases}


def check_verdict(case: Case, verdict: object, *, relaxed: bool) -> list[str]:
    """Every way ``verdict`` misses what ``case`` expects (empty when it is right)."""
    v = verdict  # a kernelpilot.verdict.Verdict
    problems: list[str] = []
    status = v.status  # type: ignore[attr-defined]
    findings = [f for f in v.findings if f.severity == "reject"]  # type: ignore[attr-defined]
    if case.static_rule and not relaxed:
        if status != "rejected" or not any(f.rule == case.static_rule for f in findings):
            problems.append(f"expected static rejection {case.static_rule}, got {status} {[f.rule for f in findings]}")
        return problems
    if status not in case.expect:
        problems.append(f"expected {sorted(case.expect)}, got {status}: {v.summary} {v.error[:300]}")  # type: ignore[attr-defined]
        return problems
    if status == "rejected" and case.rules and not any(f.rule in case.rules for f in findings):
        problems.append(f"expected a rejection with {case.rules}, got {[f.rule for f in findings]}")
    c = v.correctness  # type: ignore[attr-defined]
    if case.check == "unwritten" and (c is None or c.fully_written is not False):
        problems.append("expected fully_written=False")
    if case.check == "inputs_modified" and (c is None or c.inputs_unmodified is not False):
        problems.append("expected inputs_unmodified=False")
    if case.check == "out_of_bounds" and status == "runtime_error" and "illegal memory access" not in v.error:  # type: ignore[attr-defined]
        problems.append(f"expected a write out of bounds to fault as an illegal memory access: {v.error[:200]}")  # type: ignore[attr-defined]
    if case.check == "out_of_bounds" and status == "incorrect" and (c is None or c.in_bounds is not False):
        problems.append("expected in_bounds=False (a write past the output's end)")
    if status == "ok" and c is not None and c.in_bounds is not True:
        problems.append(f"an ok verdict whose writes out of bounds were not checked (in_bounds={c.in_bounds})")
    if case.check.startswith("error:") and case.check[6:] not in v.error:  # type: ignore[attr-defined]
        problems.append(f"expected {case.check[6:]!r} in the error, got {v.error[:300]!r}")  # type: ignore[attr-defined]
    if status == "ok" and case.mode == "benchmark":
        p = v.performance  # type: ignore[attr-defined]
        if p is None or p.candidate is None or p.eager is None:
            problems.append("benchmark verdict without timings")
    return problems
