"""One candidate, inside the worker: verify -> runtime audit -> time -> speed of light.

Returns the worker-side part of a Verdict as a plain dict (status, correctness, findings,
performance, speed_of_light, flags, error) plus ``exit`` when the worker must not be reused.
Precedence of the status: an exception is ``runtime_error``; any ``reject`` finding is ``rejected``
(more useful than ``incorrect`` when a candidate cheats and is also wrong); a failed check is
``incorrect``; otherwise ``ok``. Timing only runs for candidates that are ``ok`` in benchmark mode.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, Iterator

from kernelpilot.verdict import Finding, Performance, tier_for

REPLAY_MAX_NORMALIZED = 0.05  # stale results from other inputs sit near sqrt(2)
DRIFT_FLAG = 0.05  # eager beside the candidate vs the shared baseline's eager: beyond this, say the GPU changed


def _settings(msg: dict[str, Any]) -> dict[str, Any]:
    return dict(msg.get("settings") or {})


def tolerance_for(settings: dict[str, Any], dtype_name: str) -> Any:
    from kernelpilot.evaluation.verify import Tolerance

    atol, rtol = (settings.get("tolerances") or {}).get(dtype_name, (1e-4, 1e-4))
    max_norm = (settings.get("max_normalized_error") or {}).get(dtype_name, 1e-5)
    return Tolerance(float(atol), float(rtol), float(max_norm))


def _is_cuda_error(exc: BaseException) -> bool:
    from kernelpilot.evaluation.worker import _CUDA_MARKERS

    text = f"{type(exc).__name__}: {exc}"
    return "out of memory" in text.lower() or any(m in text for m in _CUDA_MARKERS)


def _rejects(findings: list[Finding]) -> bool:
    return any(f.severity == "reject" for f in findings)


def _replay_check(device: str) -> Any:
    import torch

    from kernelpilot.evaluation.compare import flatten_outputs, normalized_difference

    def check(cand: Any, eager: Any) -> str:
        for c, e in zip(flatten_outputs(cand), flatten_outputs(eager)):
            if type(c) is not torch.Tensor or c.shape != e.shape:
                return "timed output has the wrong type or shape"
            err = normalized_difference(c, e)  # chunked: outputs of many GB compare in bounded memory
            if math.isinf(err):
                return "timed output has NaN where eager has none"
            if err > REPLAY_MAX_NORMALIZED:
                return f"output differs from eager on the same fresh inputs (normalised error {err:.3g})"
        return ""

    return check


@contextmanager
def _phase(phases: dict[str, float], name: str, detail: str = "") -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (shown in the verdict: where did the time go)."""
    from kernelpilot.evaluation import watchdog

    t0 = time.monotonic()
    watchdog.step(name)
    what = f" ({detail})" if detail else ""
    print(f"kernelpilot-worker: {name}{what} ...", file=sys.stderr, flush=True)  # a timeout's log tail names the step
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.monotonic() - t0, 3)
        print(f"kernelpilot-worker: {name} took {phases[name]:.2f} s", file=sys.stderr, flush=True)


def _forget_candidate_modules(before: set[str], msg: dict[str, Any]) -> None:
    """Drop the modules a candidate imported from its own directory (a Triton candidate's kernels.py), so
    the next candidate with a file of the same name imports its own."""
    from pathlib import Path

    directory = Path(msg.get("candidate_dir") or Path(msg["candidate_model"]).parent).resolve()
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and directory in Path(file).resolve().parents:
            sys.modules.pop(name, None)


def run_candidate(worker: Any, msg: dict[str, Any]) -> dict[str, Any]:
    from kernelpilot.evaluation import runtime_audit as ra
    from kernelpilot.evaluation import verify as vf
    from kernelpilot.evaluation import watchdog

    s = _settings(msg)
    watchdog.begin(watchdog.Allowance.from_settings(s))
    device = worker.device
    cuda = device.startswith("cuda")
    mode = msg.get("mode", "benchmark")
    seed = int(s.get("seed", 42))
    phases: dict[str, float] = {}
    with _phase(phases, "problem"):
        state = worker.problem_state(msg["problem"], seed)
    watchdog.set_reference_seconds(state.reference_s)
    dname = vf.dtype_name(state.dtype)
    tol = tolerance_for(s, dname)
    notes: list[str] = []
    sample = vf.draw_inputs(state.module, seed + 500, "normal", device)
    compiled = None
    # a shared baseline (the baseline service measured eager and torch.compile once for this problem):
    # nothing to compile here, the slot only verifies and times
    if mode == "benchmark" and cuda and s.get("compile_baseline", True) and not msg.get("baseline"):
        with _phase(phases, "compile_baseline"):
            compiled = worker.compiled(state, s.get("compile_mode", "default"), sample)
        if state.compile_note:
            notes.append(state.compile_note)

    threads0 = ra.ThreadSnapshot.take()
    watch = ra.ThreadWatch()
    modules0 = set(sys.modules)
    from kernelpilot.evaluation import gpu_lock

    lock = gpu_lock.current()
    waited = lock.waited_s
    try:
        with watch, lock.shared():  # untimed GPU work: it may overlap a baseline's compile, never a timing
            out = _run_with_watch(worker, msg, s, state, tol, sample, compiled, threads0, notes, watch, phases)
    finally:
        _forget_candidate_modules(modules0, msg)
    if lock.waited_s > waited:
        phases["gpu_wait"] = round(lock.waited_s - waited, 3)  # waiting for another process's timing
    out["phases"] = phases
    findings, seen = [], set()
    for f in [Finding(**f) for f in out["findings"]] + watch.findings():
        if (f.rule, f.evidence) not in seen:  # a patch seen at import is seen again after each run
            seen.add((f.rule, f.evidence))
            findings.append(f)
    if watch.started and out["status"] in ("ok", "incorrect"):
        out["status"] = "rejected"
    out["findings"] = [asdict(f) for f in findings]
    if watch.started:
        out["exit"] = True
    return out


def _run_with_watch(worker: Any, msg: dict[str, Any], s: dict[str, Any], state: Any, tol: Any, sample: list[Any],
                    compiled: Any, threads0: Any, notes: list[str], watch: Any,
                    phases: dict[str, float]) -> dict[str, Any]:
    import torch

    from kernelpilot.evaluation import runtime_audit as ra
    from kernelpilot.evaluation import verify as vf

    device, cuda = worker.device, worker.device.startswith("cuda")
    mode, seed = msg.get("mode", "benchmark"), int(s.get("seed", 42))
    out: dict[str, Any] = {"status": "ok", "findings": [], "flags": [], "error": ""}
    findings: list[Finding] = []
    with _phase(phases, "import", msg["candidate_model"]):
        module = worker.import_candidate(msg["candidate_model"])
        findings += worker.identities.findings("while the candidate module was imported")
        model, weights = worker.build_model(module, state, seed)
    if msg.get("warmup"):  # Triton: what the build could not compile ahead compiles (and autotunes) here,
        with _phase(phases, "build_warmup"):  # before any check or timer; its seconds count as build time
            with torch.no_grad():
                model(*vf.clone_inputs(sample))
            if cuda:
                torch.cuda.synchronize()

    shape_sets: list[tuple[str, Any]] = [("default", None)]
    shape_sets += [(e["name"], e) for e in s.get("extra_shapes") or []]
    poison = max(int(s.get("poison_bytes", 0)) or 0, 64 << 20)
    for x in sample:
        if isinstance(x, torch.Tensor):
            poison = max(poison, 4 * x.numel() * x.element_size())
    replay: list[str] = []
    with _phase(phases, "verify"):
        corr = vf.verify(model, state.reference, tol, trials=int(s.get("trials", 5)),
                         distributions=list(s.get("distributions") or ["normal"]), seed=seed, device=device,
                         shape_sets=shape_sets, poison_bytes=poison, replay=replay)
    if replay:
        findings.append(Finding(rule="result-replay", evidence=replay[0],
                                message=f"forward returned a cached or reused output ({replay[0]}); compute into a new "
                                        "output on every call."))
    corr.notes += notes
    corr.weights = weights
    threads1 = ra.ThreadSnapshot.take()
    findings += ra.thread_findings(threads0, threads1, native=cuda)
    findings += worker.identities.findings("while the candidate ran")

    # runtime audit: ops, output type, kernels and streams
    with _phase(phases, "audit"):
        findings += _audit(model, msg, s, state, corr, seed, device)
    out["correctness"] = asdict(corr)

    exit_after = False
    if _rejects(findings):
        out["status"] = "rejected"
    elif not corr.passed:
        out["status"] = "incorrect"
    elif mode == "benchmark" and cuda:
        # the thread hook stops here: the compiled baseline may start helper threads if it ever recompiles;
        # threads the candidate leaves running are still caught by the snapshot after timing
        watch.__exit__(None, None, None)
        with _phase(phases, "timing"):
            perf, sol, flags, more = _benchmark(worker, state, model, compiled, s, tol, msg.get("baseline"))
        findings += more
        out["performance"], out["speed_of_light"] = perf, sol
        out["flags"] += flags
        if _rejects(more):
            out["status"] = "rejected"
    if corr.discriminates is False:
        out["flags"].append("this problem cannot discriminate: a zero or constant output passes its check")
    if corr.deterministic is False:
        out["flags"].append("non-deterministic: two runs on the same inputs differ bitwise")
    if ra.thread_findings(threads0, ra.ThreadSnapshot.take(), native=False) or worker.identities.changed():
        exit_after = True  # never reuse a process a candidate has changed
    out["findings"] = [asdict(f) for f in findings]
    out["exit"] = exit_after
    return out


def _audit(model: Any, msg: dict[str, Any], s: dict[str, Any], state: Any, corr: Any, seed: int,
           device: str) -> list[Finding]:
    """What ran inside forward: ATen ops, the output's type, and (CUDA) the kernels and their streams."""
    from kernelpilot.evaluation import runtime_audit as ra
    from kernelpilot.evaluation import verify as vf
    from kernelpilot.evaluation import watchdog

    cuda = device.startswith("cuda")
    found: list[Finding] = []
    audit_inputs = vf.draw_inputs(state.module, seed + 900, "normal", device)
    try:
        with watchdog.calls("audit", "forward under the operator recorder"):
            ops, audit_out = ra.record_ops(model, audit_inputs)
        found += ra.op_findings(ops, list(s.get("allowed_libraries") or []), int(s.get("small_numel", 4096)),
                                rules=str(s.get("rules") or "kernelpilot"))
        found += ra.output_type_findings(audit_out)
        del audit_out
    except Exception as exc:
        if _is_cuda_error(exc):
            raise
        # a forward that only fails while its operators are recorded is hiding from the audit
        found.append(Finding(rule="audit-failed", evidence=f"{type(exc).__name__}: {str(exc)[:200]}",
                             message="forward raised while the harness recorded its operators; it must "
                                     "behave the same under the audit."))
    if cuda:  # other tensors than record_ops saw (both alive: distinct addresses), so a cache cannot hit
        profile_inputs = vf.draw_inputs(state.module, seed + 901, "normal", device)
        try:
            with watchdog.calls("audit", "forward under torch.profiler"):
                trace = ra.profile_call(model, profile_inputs, device)
        except Exception as exc:
            if _is_cuda_error(exc):
                raise
            trace = ra.KernelTrace()  # kernel_findings reports the profiler as unavailable
            corr.notes.append(f"torch.profiler failed ({type(exc).__name__}: {str(exc)[:200]})")
        del profile_inputs
        found += ra.kernel_findings(trace, list(msg.get("own_kernels") or []), list(s.get("allowed_libraries") or []),
                                    rules=str(s.get("rules") or "kernelpilot"))
    return found


def input_pool(state: Any, s: dict[str, Any], device: str) -> tuple[list[list[Any]], Any]:
    """Input sets with distinct storage for timing, and the refill that re-draws one in place."""
    import torch

    from kernelpilot.evaluation.verify import draw_inputs

    from kernelpilot.evaluation import memory

    seed = int(s.get("seed", 42))
    wanted = max(int(s.get("input_pool", 4)), 2)
    # as many distinct input sets as fit beside the three implementations' calls (at least 2)
    pool_n = memory.input_pool_size(getattr(state, "input_bytes", 0), getattr(state, "call_bytes", 0), wanted,
                                    reserve=1 << 30) if device.startswith("cuda") else wanted
    pool = [draw_inputs(state.module, seed + 7000 + j, "normal", device) for j in range(pool_n)]
    signed = [[bool((x < 0).any()) if isinstance(x, torch.Tensor) and x.is_floating_point() else True for x in p]
              for p in pool]

    def refill(inputs: list[Any]) -> None:
        idx = next(i for i, p in enumerate(pool) if p is inputs)
        for x, sg in zip(inputs, signed[idx]):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                x.normal_()
                if not sg:
                    x.abs_()

    return pool, refill


def timing_settings(s: dict[str, Any], call_s: float = 0.0) -> Any:
    """The timing loop's settings; ``call_s``: one eager call's seconds, which ``time_budget_s`` bounds
    the samples by (at least 4 a round, so the round medians still give a noise estimate)."""
    import math

    from kernelpilot.evaluation import timing as tm

    rounds, per_round = int(s.get("rounds", 5)), int(s.get("samples_per_round", 20))
    budget = float(s.get("time_budget_s", 0.0) or 0.0)
    if budget > 0 and call_s > 0 and rounds > 0:
        per_round = min(per_round, max(4, math.ceil(budget / (rounds * call_s))))
    return tm.TimingSettings(warmup=int(s.get("warmup", 5)), rounds=rounds, samples_per_round=per_round,
                             replay_checks=int(s.get("replay_checks", 8)), cuda_graphs=bool(s.get("cuda_graphs")),
                             flush_bytes=s.get("flush_bytes"))


def _benchmark(worker: Any, state: Any, model: Any, compiled: Any, s: dict[str, Any], tol: Any,
               shared: dict[str, Any] | None = None) -> tuple[
        dict[str, Any], dict[str, Any] | None, list[str], list[Finding]]:
    """Time the candidate beside eager (and the compiled baseline when this worker compiled it), under
    the GPU's exclusive lock. ``shared``: the problem's baselines measured once by the baseline
    service; its torch.compile time is the one the candidate is compared with, eager is re-timed here."""
    from kernelpilot.evaluation import gpu_lock
    from kernelpilot.evaluation import runtime_audit as ra
    from kernelpilot.evaluation import timing as tm
    from kernelpilot.evaluation.speed_of_light import speed_of_light, suspicion_flags

    device = worker.device
    pool, refill = input_pool(state, s, device)
    impls: dict[str, Any] = {"eager": state.reference.model}
    if compiled is not None:
        impls["compiled"] = compiled
    impls["candidate"] = model
    ts = timing_settings(s, state.reference_s)
    threads0 = ra.ThreadSnapshot.take()
    with gpu_lock.current().exclusive():  # a timing: nothing else runs on this GPU meanwhile
        run = tm.measure(impls, pool, refill, ts, worker.pristine, device, check=_replay_check(device))
    del pool, refill
    findings: list[Finding] = ra.thread_findings(threads0, ra.ThreadSnapshot.take(), native=False)
    findings += worker.identities.findings("while the candidate was timed")
    if run.replay_failures:
        findings.append(Finding(rule="result-replay", evidence=run.replay_failures[0],
                                message=f"{len(run.replay_failures)} of {run.replay_checked} re-checked timed calls "
                                        f"returned a wrong result ({run.replay_failures[0]}); results must not be cached."))
    cand, eager, comp = run.timings["candidate"], run.timings["eager"], run.timings.get("compiled")
    flags = list(run.notes)
    missing = ""
    source = "interleaved"
    if shared is not None:
        from kernelpilot.evaluation.baselines import Baselines

        base = Baselines.from_dict(shared)
        comp, source = base.compiled, "shared"
        missing = "" if comp is not None else (base.compiled_missing or "; ".join(base.notes) or "not measured")
        if base.eager and base.eager.median_ms > 0 and eager.median_ms > 0:
            drift = eager.median_ms / base.eager.median_ms - 1.0
            if abs(drift) > DRIFT_FLAG:
                flags.append(f"eager ran {100 * drift:+.0f}% against the shared baseline measured for this problem "
                             f"({eager.median_ms:.4g} ms now, {base.eager.median_ms:.4g} ms then): the GPU's state "
                             "changed; the ratio vs torch.compile uses the compiled time measured then")
    elif comp is None:
        missing = state.compile_note or ("the torch.compile baseline is turned off (compile_baseline = false)"
                                         if not s.get("compile_baseline", True) else "not measured")
    perf = Performance(candidate=cand, eager=eager, compiled=comp, compile_mode=s.get("compile_mode", "default"),
                       cuda_graphs=ts.cuda_graphs, l2_flushed=True, compiled_missing=missing, baseline_source=source)
    perf.speedup_vs_eager = eager.median_ms / cand.median_ms if cand.median_ms > 0 else None
    perf.speedup_vs_compile = comp.median_ms / cand.median_ms if comp and cand.median_ms > 0 else None
    perf.noise_pct = tm.noise_pct(cand)
    perf.tier = tier_for(perf.speedup_vs_eager, perf.speedup_vs_compile, True)
    gap = tm.host_gap_flag(run.timings, float(s.get("host_gap_threshold", 0.2)))
    if gap:
        flags.append(gap)
    sol_dict = None
    ceil = worker.ceilings
    if ceil is None:
        flags.append(f"speed of light unavailable: {worker.ceilings_note or 'no measured ceilings'}")
        return asdict(perf), None, flags, findings
    try:
        sol = speed_of_light(bytes_moved=state.info.get("bytes_moved"), flops=state.info.get("flops"),
                             copy_tbps=ceil.copy_tbps, tflops=ceil.flops_rate(str(state.dtype).replace("torch.", "")),
                             candidate_ms=cand.median_ms, compiled_ms=comp.median_ms if comp else None,
                             source=ceil.source())
        flags += suspicion_flags(sol, cand.median_ms, perf.speedup_vs_compile)
        sol_dict = asdict(sol)
    except Exception as exc:
        flags.append(f"speed of light unavailable ({type(exc).__name__}: {exc})")
    return asdict(perf), sol_dict, flags, findings
