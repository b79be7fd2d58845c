"""Timing one candidate in the worker: eager and torch.compile beside it, interleaved in the same rounds, under the
GPU's exclusive lock; then the speed of light. A problem's shared baselines (the baseline service) give only what
does not drift: the problem's analysis (and, in the pipeline, torch.compile's own check).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from kernelpilot.evaluation.audit import threads
from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.correctness.compare import (
    Outputs,
    Tolerance,
    flatten_outputs,
    replay_difference,
)
from kernelpilot.evaluation.correctness.inputs import Inputs, draw_inputs
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.timing import interleaved as tm
from kernelpilot.evaluation.timing import training
from kernelpilot.evaluation.timing.speed_of_light import for_problem, suspicion_flags
from kernelpilot.evaluation.worker import memory
from kernelpilot.verdict import Finding, Performance, Timing, tier_for

if TYPE_CHECKING:
    import torch

    from kernelpilot.evaluation.correctness.reference import Forward
    from kernelpilot.evaluation.worker.interface import TimingWorker
    from kernelpilot.evaluation.worker.problem_state import ProblemState

REPLAY_MAX_NORMALIZED = 0.05  # stale results from other inputs sit near sqrt(2)
REPLAY_BAND = 2.0  # an element is off when |cand - eager| > REPLAY_BAND * (atol + rtol*|eager|)
DRIFT_FLAG = 0.05  # eager beside the candidate vs the shared baseline's eager: beyond this, say the GPU changed


def _replay_check(device: str, tol: Tolerance | None = None) -> Callable[[object, Outputs], str]:
    """The check of a timed call's output against eager's on the same inputs (results must not be
    cached). It fails on NaN where eager has none, or when the normalised error is over
    REPLAY_MAX_NORMALIZED *and* some element lies outside the tolerance band around eager: a stale
    result of other inputs is off nearly everywhere, while an output whose norm is near zero (the mean
    after a group norm) has a large normalised error from rounding alone, with every element in the band."""
    import torch

    atol = REPLAY_BAND * float(getattr(tol, "atol", 0.0) or 0.0)
    rtol = REPLAY_BAND * float(getattr(tol, "rtol", 0.0) or 0.0)

    def check(cand: object, eager: Outputs) -> str:
        for c, e in zip(flatten_outputs(cand), flatten_outputs(eager)):
            if type(c) is not torch.Tensor or c.shape != e.shape:
                return "timed output has the wrong type or shape"
            err, off = replay_difference(c, e, atol, rtol)  # chunked: outputs of many GB in bounded memory
            if math.isinf(err):
                return "timed output has NaN where eager has none"
            if err > REPLAY_MAX_NORMALIZED and off:
                return (f"output differs from eager on the same fresh inputs (normalised error {err:.3g}, "
                        f"{off} of {e.numel()} elements outside {atol:.3g} + {rtol:.3g}*|eager|)")
        return ""

    return check


def input_pool(state: ProblemState, s: EvalSettings, device: str, call_factor: int = 1) -> tuple[
        list[Inputs], Callable[[Inputs], None]]:
    """Input sets with distinct storage for timing, and the refill that re-draws one in place; ``call_factor``:
    a timed call's peak against the eager forward's measured one (a training step's is larger)."""
    import torch

    seed = int(s.seed)
    wanted = max(int(s.input_pool), 2)
    # as many distinct input sets as fit beside the three implementations' calls (at least 2)
    pool_n = memory.input_pool_size(state.input_bytes, call_factor * state.call_bytes, wanted,
                                    reserve=1 << 30) if device.startswith("cuda") else wanted
    pool = [draw_inputs(state.module, seed + 7000 + j, "normal", device) for j in range(pool_n)]
    signed = [[bool((x < 0).any()) if isinstance(x, torch.Tensor) and x.is_floating_point() else True for x in p]
              for p in pool]

    def refill(inputs: Inputs) -> None:
        idx = next(i for i, p in enumerate(pool) if p is inputs)
        for x, sg in zip(inputs, signed[idx]):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                x.normal_()
                if not sg:
                    x.abs_()

    return pool, refill


def timing_settings(s: EvalSettings, call_s: float = 0.0) -> tm.TimingSettings:
    """The timing loop's settings; ``call_s``: one eager call's seconds, which ``time_budget_s`` bounds
    the samples by (at least 4 a round, so the round medians still give a noise estimate)."""
    rounds, per_round = int(s.rounds), int(s.samples_per_round)
    budget = float(s.time_budget_s or 0.0)
    if budget > 0 and call_s > 0 and rounds > 0:
        per_round = min(per_round, max(4, math.ceil(budget / (rounds * call_s))))
    return tm.TimingSettings(warmup=int(s.warmup), rounds=rounds, samples_per_round=per_round,
                             replay_checks=int(s.replay_checks), cuda_graphs=bool(s.cuda_graphs),
                             flush_bytes=s.flush_bytes)


def benchmark(worker: TimingWorker, state: ProblemState, model: Forward, compiled: Forward | None, s: EvalSettings,
              tol: Tolerance, shared: dict[str, Any] | None = None,
              train: torch.nn.Module | None = None) -> tuple[
        dict[str, Any], dict[str, Any] | None, list[str], list[Finding]]:
    """Time the candidate beside eager and the compiled baseline (when this worker compiled one), under the GPU's
    exclusive lock. ``shared``: the problem's baselines measured once by the baseline service; its analysis is
    used, its times only to say when the GPU's state has changed since. ``train``: a training drop-in's ModelNew
    (it defines backward): each implementation is then timed forward and backward (timing/training.py)."""
    device = worker.device
    pool, refill = input_pool(state, s, device, training.POOL_FACTOR if train is not None else 1)
    impls: dict[str, Forward] = {"eager": state.reference.model}
    if compiled is not None:
        impls["compiled"] = compiled
    impls["candidate"] = model
    threads0 = threads.ThreadSnapshot.take()
    with gpu_lock.current().exclusive():  # a timing: nothing else runs on this GPU meanwhile
        run, ts, stepped, flags = _measure(worker, state, impls, train, pool, refill, s, tol)
    del pool, refill
    findings: list[Finding] = threads.thread_findings(threads0, threads.ThreadSnapshot.take(), native=False)
    findings += worker.identities.findings("while the candidate was timed")
    if run.replay_failures:
        must = ("a training step's outputs and gradients must match eager's on the same inputs: a wrong backward or a "
                "stale result" if stepped else "results must not be cached")
        findings.append(Finding(rule="result-replay", evidence=run.replay_failures[0],
                                message=f"{len(run.replay_failures)} of {run.replay_checked} re-checked timed calls "
                                        f"returned a wrong result ({run.replay_failures[0]}); {must}."))
    cand, eager = run.timings["candidate"], run.timings["eager"]
    flags += run.notes
    comp, source, missing, known = _compiled_baseline(run.timings.get("compiled"), eager, shared, state, s, flags,
                                                      stepped)
    perf = Performance(candidate=cand, eager=eager, compiled=comp, compile_mode=s.compile_mode,
                       cuda_graphs=ts.cuda_graphs, l2_flushed=True, compiled_missing=missing, baseline_source=source,
                       timed=training.TIMED if stepped else "forward")
    perf.speedup_vs_eager = eager.median_ms / cand.median_ms if cand.median_ms > 0 else None
    perf.speedup_vs_compile = comp.median_ms / cand.median_ms if comp and cand.median_ms > 0 else None
    perf.noise_pct = tm.noise_pct(cand)
    perf.tier = tier_for(perf.speedup_vs_eager, perf.speedup_vs_compile, True)
    gap = tm.host_gap_flag(run.timings, float(s.host_gap_threshold))
    if gap:
        flags.append(gap)
    sol_dict = None
    if stepped:  # the problem's analysis (bytes, flops) is its forward's
        flags.append(training.FLAG)
        return asdict(perf), None, flags, findings
    ceil = worker.ceilings
    if ceil is None:
        flags.append(f"speed of light unavailable: {worker.ceilings_note or 'no measured ceilings'}")
        return asdict(perf), None, flags, findings
    try:
        sol = for_problem(state.analysis(known), str(state.dtype), ceil, worker.initial_state,
                          candidate_ms=cand.median_ms, compiled_ms=comp.median_ms if comp else None)
        flags += suspicion_flags(sol, cand.median_ms, perf.speedup_vs_compile)
        sol_dict = asdict(sol)
    except Exception as exc:
        flags.append(f"speed of light unavailable ({type(exc).__name__}: {exc})")
    return asdict(perf), sol_dict, flags, findings


def _measure(worker: TimingWorker, state: ProblemState, impls: dict[str, Forward], train: torch.nn.Module | None,
             pool: list[Inputs], refill: Callable[[Inputs], None], s: EvalSettings, tol: Tolerance) -> tuple[
        tm.TimingRun, tm.TimingSettings, bool, list[str]]:
    """The interleaved timing: a training drop-in's as training steps (no CUDA graph: autograd's backward is not
    captured), or its forward where a step does not fit in the GPU's memory, said in a flag (a candidate that saves
    memory is never failed for the reference's backward). The run, its settings, whether it timed steps, flags."""
    import torch

    ts, check = timing_settings(s, state.reference_s), _replay_check(worker.device, tol)
    flags: list[str] = []
    if train is not None:
        steps = replace(ts, cuda_graphs=False)
        # torch.compile's step where its backward was built (pipeline: compile_backward); else said, not timed
        stepping = {k: f for k, f in impls.items() if k != "compiled" or not state.compiled_backward}
        try:
            return (tm.measure(training.training_impls(stepping, state.reference.model, train, int(s.seed)), pool,
                               refill, steps, worker.pristine, worker.device, check=check), steps, True, flags)
        except torch.OutOfMemoryError as exc:
            memory.release(worker.device)
            flags.append(training.out_of_memory(exc))
    return tm.measure(impls, pool, refill, ts, worker.pristine, worker.device, check=check), ts, False, flags


def _compiled_baseline(timed: Timing | None, eager: Timing, shared: dict[str, Any] | None, state: ProblemState,
                       s: EvalSettings, flags: list[str], stepped: bool = False) -> tuple[
        Timing | None, str, str, dict[str, Any]]:
    """The torch.compile time the candidate is compared with: always the one timed beside it, in the same rounds
    as eager and the candidate (issue 51: a ratio against a time measured minutes earlier moved 10-50% with the
    GPU's state). ``shared`` (the baseline service's measurement of the problem) gives the problem's analysis,
    and a note when eager has moved since. The time (None: why not, in the third field), where it comes from,
    and the problem's analysis when the shared baselines carry it. ``stepped``: timed as training steps, where a
    torch.compile whose backward could not be built is not timed."""
    backward = state.compiled_backward if stepped else ""
    missing = "" if timed is not None else state.compile_note or backward or (
        "the torch.compile baseline is turned off (compile_baseline = false)"
        if not s.compile_baseline else "not measured")
    if shared is None:
        return timed, "interleaved", missing, {}
    base = Baselines.from_dict(shared)
    if base.eager and base.eager.median_ms > 0 and eager.median_ms > 0:
        drift = eager.median_ms / base.eager.median_ms - 1.0
        if abs(drift) > DRIFT_FLAG:
            flags.append(f"eager ran {100 * drift:+.0f}% against the baseline measured for this problem earlier in "
                         f"this run ({eager.median_ms:.4g} ms now, {base.eager.median_ms:.4g} ms then): the GPU's "
                         "state changed; both ratios use the times measured beside the candidate")
    return timed, "interleaved", missing, base.problem_info
