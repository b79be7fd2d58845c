"""One candidate, inside the worker: verify -> runtime audit -> time -> speed of light.

Returns the worker-side part of a Verdict as a plain dict (status, correctness, findings,
performance, speed_of_light, flags, error) plus ``exit`` when the worker must not be reused.
Precedence of the status: an exception is ``runtime_error``; any ``reject`` finding is ``rejected``
(more useful than ``incorrect`` when a candidate cheats and is also wrong); a failed check is
``incorrect``; otherwise ``ok``. Timing only runs for candidates that are ``ok`` in benchmark mode.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from kernelpilot.evaluation.settings import EvalSettings, settings_of
from kernelpilot.evaluation.timing.candidate import benchmark, input_pool, timing_settings  # noqa: F401 - engine's names too
from kernelpilot.rules import get_rules
from kernelpilot.verdict import Finding

# how many times slower a candidate's forward may run under the audit's instruments than its slowest verified
# call: a Python dispatch mode alone made a loop of 150k small ATen calls 7x (torch 2.11) to 11x (2.14) slower
# on our 2-core CPU machines, and the operator recorder does more per call; the profiler costs less
RECORDER_SLOWDOWN = 30.0
PROFILER_SLOWDOWN = 5.0
# the findings a PyTorch rewrite gets for being one; "no-kernel" says it, these become warnings
PURE_COVERED = frozenset({"torch-compute-op", "no-custom-kernel", "library-kernel", "library-only"})
# what a CUDA error (the candidate broke the GPU context) says
CUDA_MARKERS = ("CUDA error", "illegal memory access", "device-side assert", "AcceleratorError",
                "unspecified launch failure", "misaligned address", "illegal instruction", "CUBLAS_STATUS",
                "cudaErrorLaunch", "an illegal memory")
# rejected, yet what it times is what it computes: timed anyway, so the report can say how fast it is
TIMED_ANYWAY = frozenset({"output-reuse"})



def tolerance_for(settings: EvalSettings, dtype_name: str) -> Any:
    from kernelpilot.evaluation.correctness.verify import Tolerance

    atol, rtol = (settings.tolerances or {}).get(dtype_name, (1e-4, 1e-4))
    max_norm = (settings.max_normalized_error or {}).get(dtype_name, 1e-5)
    return Tolerance(float(atol), float(rtol), float(max_norm))


def _is_cuda_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return "out of memory" in text.lower() or any(m in text for m in CUDA_MARKERS)


def _rejects(findings: list[Finding]) -> bool:
    return any(f.severity == "reject" for f in findings)


@contextmanager
def _phase(phases: dict[str, float], name: str, detail: str = "") -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (shown in the verdict: where did the time go)."""
    from kernelpilot.evaluation.worker import watchdog

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
    directory = Path(msg.get("candidate_dir") or Path(msg["candidate_model"]).parent).resolve()
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and directory in Path(file).resolve().parents:
            sys.modules.pop(name, None)


def run_candidate(worker: Any, msg: dict[str, Any]) -> dict[str, Any]:
    from kernelpilot.evaluation.audit import runtime as ra
    from kernelpilot.evaluation.correctness import verify as vf
    from kernelpilot.evaluation.worker import watchdog

    s = settings_of(msg)
    watchdog.begin(watchdog.Allowance.from_settings(s))
    device = worker.device
    cuda = device.startswith("cuda")
    mode = msg.get("mode", "benchmark")
    seed = int(s.seed)
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
    if mode == "benchmark" and cuda and s.compile_baseline and not msg.get("baseline"):
        with _phase(phases, "compile_baseline"):
            compiled = worker.compiled(state, s.compile_mode, sample)
        if state.compile_note:
            notes.append(state.compile_note)

    threads0 = ra.ThreadSnapshot.take()
    watch = ra.ThreadWatch()
    modules0 = set(sys.modules)
    from kernelpilot.evaluation.timing import gpu_lock
    from kernelpilot.evaluation.static import self_timing

    lock = gpu_lock.current()
    waited = lock.waited_s
    timed_self = self_timing.signs(Path(msg["candidate_model"]))
    # untimed GPU work may overlap a baseline's compile, never a timing; a candidate that times itself
    # (and picks its path by it) runs with the GPU to itself throughout, as a timing does
    hold = self_timing.gpu_alone("the candidate times itself") if timed_self else lock.shared()
    try:
        with watch, hold:
            out = _run_with_watch(worker, msg, s, state, tol, sample, compiled, threads0, notes, watch, phases)
    finally:
        _forget_candidate_modules(modules0, msg)
    if timed_self:
        out["findings"].append(asdict(self_timing.finding(timed_self)))
    if lock.waited_s > waited:
        phases["gpu_wait"] = round(lock.waited_s - waited, 3)  # waiting for another process's timing
    from kernelpilot.evaluation.worker import compile_hook

    compile_s, compiled_here = compile_hook.take()
    if compile_s:  # build time, not the candidate's: the verdict's build seconds include it
        phases["build_in_worker"] = round(compile_s, 3)
        out["flags"].append("compiled inside the worker (a load_inline the build step could not reach: "
                            + "; ".join(compiled_here) + "); counted as build time")
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


def _run_with_watch(worker: Any, msg: dict[str, Any], s: EvalSettings, state: Any, tol: Any, sample: list[Any],
                    compiled: Any, threads0: Any, notes: list[str], watch: Any,
                    phases: dict[str, float]) -> dict[str, Any]:
    import torch

    from kernelpilot.evaluation.audit import runtime as ra
    from kernelpilot.evaluation.correctness import verify as vf

    device, cuda = worker.device, worker.device.startswith("cuda")
    mode, seed = msg.get("mode", "benchmark"), int(s.seed)
    out: dict[str, Any] = {"status": "ok", "findings": [], "flags": [], "error": ""}
    findings: list[Finding] = []
    from kernelpilot.evaluation.worker import compile_hook

    compile_hook.install_dynamo()  # again: torch._dynamo.reset() between problems drops its callbacks
    with _phase(phases, "import", msg["candidate_model"]):
        module = worker.import_candidate(msg["candidate_model"])
        findings += worker.identities.findings("while the candidate module was imported")
        model, weights = worker.build_model(module, state, seed)
    rules = get_rules(s.rules)
    cand_state, more, call = _candidate_state(worker, model, rules)
    findings += more
    pure = msg.get("kind") == "pytorch"
    if pure:
        if msg.get("inductor_libraries"):  # torch.compile's own run is these library calls (inductor_origin.py)
            findings.append(Finding(rule="no-kernel", severity="warn", evidence="ModelNew.forward", message=(
                "no kernel of its own: torch.compile's run of this problem is the library calls it declares "
                "(KERNELPILOT_LIBRARIES), and so is this candidate's")))
        else:
            findings.append(Finding(rule="no-kernel", evidence="ModelNew.forward", message=(
                "no kernel of its own: a PyTorch rewrite (it is verified and timed, so the report can say what "
                "its speed is made of)")))
    if msg.get("warmup"):  # Triton: what the build could not compile ahead compiles (and autotunes) here,
        with _phase(phases, "build_warmup"):  # before any check or timer; its seconds count as build time
            with torch.no_grad():
                call(*vf.clone_inputs(sample))
            if cuda:
                torch.cuda.synchronize()

    shape_sets: list[tuple[str, Any]] = [("default", None)]
    shape_sets += [(e["name"], e) for e in s.extra_shapes or []]
    poison = max(int(s.poison_bytes) or 0, 64 << 20)
    for x in sample:
        if isinstance(x, torch.Tensor):
            poison = max(poison, 4 * x.numel() * x.element_size())
    replay: list[str] = []
    reused: list[str] = []
    keep = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    with _phase(phases, "verify"):
        corr = vf.verify(call, state.reference, tol, trials=int(s.trials),
                         distributions=list(s.distributions or ["normal"]), seed=seed, device=device,
                         shape_sets=shape_sets, poison_bytes=poison, replay=replay, cache=state.references,
                         reused=reused, keep=keep)
    del keep
    if replay:
        findings.append(Finding(rule="result-replay", evidence=replay[0],
                                message=f"forward returned a cached output ({replay[0]}); compute into a new "
                                        "output on every call."))
    elif reused:
        findings.append(Finding(rule="output-reuse", evidence=reused[0], message=(
            f"forward returns one output buffer on every call ({reused[0]}); it is computed each time, so its "
            "timing stands, but it is no drop-in for a module that returns new tensors: return a new tensor "
            "(for a CUDA graph, a clone of its static output)")))
    corr.notes += notes
    corr.weights = weights
    threads1 = ra.ThreadSnapshot.take()
    findings += ra.thread_findings(threads0, threads1, native=cuda)
    findings += worker.identities.findings("while the candidate ran")

    # runtime audit: ops, output type, kernels and streams
    with _phase(phases, "audit"):
        audit = _audit(call, msg, s, state, corr, seed, device)
        if pure:  # its torch ops and library kernels are what "no kernel of its own" already says
            for f in audit:
                if f.rule in PURE_COVERED:
                    f.severity = "warn"
        findings += audit
    if call.changed:  # a switch flipped inside forward (after ModelNew was built): judged as one set at import
        findings += _state_findings(cand_state, call.changed[-1], " inside forward", rules)
        cand_state = call.state
    out["correctness"] = asdict(corr)

    exit_after = False
    # a PyTorch rewrite is rejected and timed anyway: what its claimed speed-up is made of
    timed_anyway = all(f.rule in TIMED_ANYWAY or (pure and f.rule in PURE_COVERED | {"no-kernel"})
                       for f in findings if f.severity == "reject")
    if _rejects(findings):
        out["status"] = "rejected"
    elif not corr.passed:
        out["status"] = "incorrect"
    if corr.passed and (out["status"] == "ok" or timed_anyway) and mode == "benchmark" and cuda:
        # the thread hook stops here: the compiled baseline may start helper threads if it ever recompiles;
        # threads the candidate leaves running are still caught by the snapshot after timing
        watch.__exit__(None, None, None)
        with _phase(phases, "timing"):
            timed_call = call if call.state != worker.initial_state else model  # no guard's host time if needless
            perf, sol, flags, timed = benchmark(worker, state, timed_call, compiled, s, tol, msg.get("baseline"))
        findings += timed
        out["performance"], out["speed_of_light"] = perf, sol
        out["flags"] += flags
        if _rejects(timed):
            out["status"] = "rejected"
    if rules.kernelbench:
        with _phase(phases, "kernelbench"):
            out["kernelbench"] = _kernelbench_score(state, module, rules, s, device, mode == "benchmark" and cuda,
                                                    worker.initial_state, cand_state)
    if corr.discriminates is False:
        out["flags"].append("this problem cannot discriminate: a zero or constant output passes its check")
    if corr.deterministic is False:
        out["flags"].append("non-deterministic: two runs on the same inputs differ bitwise")
    if ra.thread_findings(threads0, ra.ThreadSnapshot.take(), native=False) or worker.identities.changed():
        exit_after = True  # never reuse a process a candidate has changed
    out["findings"] = [asdict(f) for f in findings]
    out["exit"] = exit_after
    return out


def _audit(model: Any, msg: dict[str, Any], s: EvalSettings, state: Any, corr: Any, seed: int,
           device: str) -> list[Finding]:
    """What ran inside forward: ATen ops, the output's type, and (CUDA) the kernels and their streams."""
    from kernelpilot.evaluation.audit import runtime as ra
    from kernelpilot.evaluation.correctness import verify as vf
    from kernelpilot.evaluation.worker import watchdog

    cuda = device.startswith("cuda")
    found: list[Finding] = []
    audit_inputs = vf.draw_inputs(state.module, seed + 900, "normal", device)
    ops: dict[str, Any] | None = None
    try:
        with watchdog.calls("audit", "forward under the operator recorder", slowdown=RECORDER_SLOWDOWN):
            ops, audit_out = ra.record_ops(model, audit_inputs)
        found += ra.op_findings(ops, list(s.allowed_libraries or []), int(s.small_numel),
                                rules=str(s.rules or "kernelpilot"))
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
            # the call alone under its allowance; the profiler's start, stop and export under the harness's
            trace = ra.profile_call(model, profile_inputs, device, watch=lambda: watchdog.calls(
                "audit", "forward under torch.profiler", slowdown=PROFILER_SLOWDOWN))
        except Exception as exc:
            if _is_cuda_error(exc):
                raise
            trace = ra.KernelTrace()  # kernel_findings reports the profiler as unavailable
            corr.notes.append(f"torch.profiler failed ({type(exc).__name__}: {str(exc)[:200]})")
        del profile_inputs
        if ops is not None:  # which ops ran while another stream was current (the side-stream rule needs it)
            trace.off_stream_ops = sorted(n for n, use in ops.items() if use.off_stream)
            trace.watched_dispatch = True
        found += ra.kernel_findings(trace, list(msg.get("own_kernels") or []), list(s.allowed_libraries or []),
                                    rules=str(s.rules or "kernelpilot"))
    return found


def _candidate_state(worker: Any, model: Any, rules: Any) -> tuple[Any, list[Finding], Any]:
    """torch's global switches as the candidate left them (import and ModelNew): the findings they give,
    and the candidate wrapped (``global_state.Guarded``) to run in its own state while the reference and
    baselines run in the problem's default one (restored here, after each call, and by the worker after
    the evaluation)."""
    from kernelpilot.evaluation.worker import global_state as gs

    default = worker.initial_state
    mine = gs.Snapshot.take()
    found = _state_findings(default, mine, "", rules)
    if mine != default:
        default.apply()
    return mine, found, gs.Guarded(model, mine)


def _state_findings(default: Any, mine: Any, when: str, rules: Any) -> list[Finding]:
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


def _kernelbench_score(state: Any, module: Any, rules: Any, s: EvalSettings, device: str, measure: bool,
                       default: Any, mine: Any) -> dict[str, Any]:
    """KernelBench's own score (kernelbench_harness.py), run as KernelBench runs it: in the candidate's
    global state for the reference too; every candidate call under one watchdog allowance."""
    from kernelpilot.evaluation.worker import global_state as gs
    from kernelpilot.evaluation.kernelbench import harness as kb
    from kernelpilot.evaluation.worker import watchdog
    from kernelpilot.evaluation.kernelbench.inputs import KernelBenchInputs

    harness = rules.harness
    if state.kb_inputs is None:
        state.kb_inputs = KernelBenchInputs(state.module, device)
    changes = default.changes(mine)
    note = ("KernelBench's harness imports ModelNew before running anything: its reference ran in the "
            f"candidate's global state ({'; '.join(changes)}), here too") if changes else ""
    calls = 2 * (harness.trials + (harness.warmup + harness.perf_trials + harness.discard_first if measure else 0)) + 2
    from kernelpilot.evaluation.static.self_timing import gpu_alone

    try:
        # KernelBench runs on a GPU of its own: ModelNew(...), its trials (a first call that may tune itself) and
        # its timing get this GPU to themselves here too, never beside another process's compile (self_timing.py)
        with gpu_alone("KernelBench's harness"), \
                watchdog.calls("kernelbench", "KernelBench's harness (its trials and timing)", n=calls), gs.applied(mine):
            return kb.score(state.module, module.ModelNew, harness, str(s.kb_precision or "fp32"), device,
                            measure, note, inputs_cache=state.kb_inputs)
    except Exception as exc:
        if _is_cuda_error(exc):
            raise
        # what escapes KernelBench's eval_kernel_against_ref (ModelNew(...) raising anything but a RuntimeError,
        # say) is caught by its batch scorer as "other_error", with compiled=False
        return {"preset": harness.version, "commit": harness.commit, "status": "compile_error", "compiled": False,
                "error": f"{type(exc).__name__}: {str(exc)[:400]}",
                "notes": ([note] if note else []) + ["KernelBench's batch scorer records an exception that escapes its "
                                                     "harness as not compiled (other_error)"]}

