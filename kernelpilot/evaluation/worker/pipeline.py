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
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterator

from kernelpilot.evaluation import protocol
from kernelpilot.evaluation.audit import threads
from kernelpilot.evaluation.audit.forward import audit_forward
from kernelpilot.evaluation.correctness import compiled_check
from kernelpilot.evaluation.correctness import verify as vf
from kernelpilot.evaluation.correctness.compare import Tolerance, dtype_name
from kernelpilot.evaluation.correctness.inputs import (
    Inputs,
    ShapeSet,
    clone_inputs,
    draw_inputs,
)
from kernelpilot.evaluation.settings import EvalSettings, settings_of
from kernelpilot.evaluation.static import self_timing
from kernelpilot.evaluation.static.training import defines_backward
from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.timing import training as train_timing
from kernelpilot.evaluation.timing.candidate import (  # noqa: F401 - engine's names too
    benchmark,
    input_pool,
    timing_settings,
)
from kernelpilot.evaluation.worker import compile_hook, cute_hook, kb_score, watchdog
from kernelpilot.evaluation.worker import global_state as gs
from kernelpilot.rules import Rules, get_rules
from kernelpilot.verdict import Correctness, Finding

if TYPE_CHECKING:
    import torch

    from kernelpilot.evaluation.correctness.reference import Forward
    from kernelpilot.evaluation.worker.interface import CandidateWorker
    from kernelpilot.evaluation.worker.problem_state import ProblemState

# the findings a PyTorch rewrite gets for being one; "no-kernel" says it, these become warnings
PURE_COVERED = frozenset({"torch-compute-op", "no-custom-kernel", "library-kernel", "library-only"})
# rejected, yet what it times is what it computes: timed anyway, so the report can say how fast it is
TIMED_ANYWAY = frozenset({"output-reuse"})


def tolerance_for(settings: EvalSettings, dtype_name: str) -> Tolerance:
    atol, rtol = (settings.tolerances or {}).get(dtype_name, (1e-4, 1e-4))
    max_norm = (settings.max_normalized_error or {}).get(dtype_name, 1e-5)
    return Tolerance(float(atol), float(rtol), float(max_norm))


def _rejects(findings: list[Finding]) -> bool:
    return any(f.severity == "reject" for f in findings)


@contextmanager
def _phase(phases: dict[str, float], name: str, detail: str = "") -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (shown in the verdict: where did the time go)."""
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


@dataclass
class _Job:
    """One evaluation request inside the worker: what every step of the pipeline reads."""

    worker: CandidateWorker
    msg: dict[str, Any]
    s: EvalSettings
    state: ProblemState
    tol: Tolerance
    phases: dict[str, float]
    stage: bool = False  # send the test verdict before timing (a benchmark with "stage_test": _stage_test)
    train: bool = False  # a training drop-in (ModelNew defines backward): timed forward and backward

    @property
    def device(self) -> str:
        return self.worker.device

    @property
    def cuda(self) -> bool:
        return self.worker.device.startswith("cuda")

    @property
    def seed(self) -> int:
        return int(self.s.seed)

    @property
    def timed(self) -> bool:
        """A benchmark on a GPU: the candidate is timed (when it is ok)."""
        return self.msg.get("mode", "benchmark") == "benchmark" and self.cuda


@dataclass
class _Candidate:
    """The candidate as the pipeline runs it."""

    module: ModuleType
    model: torch.nn.Module
    weights: str  # how its weights were made equal to Model's (Worker.build_model)
    call: gs.Guarded  # the candidate run in its own global state
    state: gs.Snapshot  # torch's global switches as the candidate left them
    pure: bool  # a PyTorch rewrite: no kernel of its own


def run_candidate(worker: CandidateWorker, msg: dict[str, Any]) -> dict[str, Any]:
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
    job = _Job(worker, msg, s, state, tolerance_for(s, dtype_name(state.dtype)), phases)
    job.train = job.timed and defines_backward(Path(msg["candidate_model"]))  # read only where it is timed
    notes: list[str] = []
    sample = draw_inputs(state.module, seed + 500, "normal", device)
    compiled = None
    shared_check = str((msg.get("baseline") or {}).get("compiled_check") or "")  # the baseline service's
    # torch.compile is timed beside the candidate in every benchmark (the same minute): compiled once per problem
    # in this worker (from Inductor's caches where the baseline service compiled it), its own check made once
    if mode == "benchmark" and cuda and s.compile_baseline:
        with _phase(phases, "compile_baseline"):
            compiled = worker.compiled(state, s.compile_mode, lambda: sample)
        if state.compile_note:
            notes.append(state.compile_note)
        elif compiled is not None:
            with _phase(phases, "compile_check"), gpu_lock.current().shared():
                compiled_check.once(state, compiled, job.tol, s, device, shared_check)
            if job.train and state.compiled_backward is None:  # its backward too, before the candidate's import
                with _phase(phases, "compile_backward"), gpu_lock.current().shared():
                    state.compiled_backward = train_timing.warm_compiled(compiled, state.reference.model,
                                                                         lambda: sample, seed)

    threads0 = threads.ThreadSnapshot.take()
    watch = threads.ThreadWatch()
    modules0 = set(sys.modules)
    lock = gpu_lock.current()
    waited = lock.waited_s
    timed_self = self_timing.signs(Path(msg["candidate_model"]))
    # the staged test verdict is what a test request gives only where nothing after the run changes it
    job.stage = bool(msg.get("stage_test")) and job.timed and not timed_self and not get_rules(s.rules).kernelbench
    # untimed GPU work may overlap a baseline's compile, never a timing; a candidate that times itself
    # (and picks its path by it) runs with the GPU to itself throughout, as a timing does
    hold = self_timing.gpu_alone("the candidate times itself") if timed_self else lock.shared()
    try:
        with watch, hold:
            out = _run_with_watch(job, sample, compiled, threads0, notes, watch)
    finally:
        _forget_candidate_modules(modules0, msg)
    if timed_self:
        out["findings"].append(asdict(self_timing.finding(timed_self)))
    if lock.waited_s > waited:
        phases["gpu_wait"] = round(lock.waited_s - waited, 3)  # waiting for another process's timing
    check = (state.compiled_check if compiled is not None else "") or shared_check
    if check and isinstance(out.get("correctness"), dict):  # every verdict of the problem says it
        out["correctness"]["compiled_check"] = check
        if flag := compiled_check.flag(check):
            out["flags"].append(flag)
    compile_s, compiled_here = compile_hook.take()
    if compile_s:  # build time, not the candidate's: the verdict's build seconds include it
        phases["build_in_worker"] = round(compile_s, 3)
        out["flags"].append("compiled inside the worker (what the build step could not reach: "
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


def _run_with_watch(job: _Job, sample: Inputs, compiled: Forward | None, threads0: threads.ThreadSnapshot,
                    notes: list[str], watch: threads.ThreadWatch) -> dict[str, Any]:
    """The candidate imported, built, verified, audited and (when it is ok, in a GPU benchmark) timed, while the
    thread hook watches; the worker-side part of its verdict."""
    worker, s, state = job.worker, job.s, job.state
    out: dict[str, Any] = {"status": "ok", "findings": [], "flags": [], "error": ""}
    rules = get_rules(s.rules)
    findings: list[Finding] = []
    cute_hook.take()  # an earlier request's compiles are not this candidate's
    cand = _load(job, sample, rules, findings)
    out.update(cute_hook.take())  # its CuTe compiles: ptxas's figures per kernel, each compile and how it was served
    corr = _verify(job, cand, sample, findings)
    corr.notes += notes
    corr.weights = cand.weights
    threads1 = threads.ThreadSnapshot.take()
    findings += threads.thread_findings(threads0, threads1, native=job.cuda)
    findings += worker.identities.findings("while the candidate ran")

    # runtime audit: ops, output type, kernels and streams
    with _phase(job.phases, "audit"):
        audit = audit_forward(cand.call, state.module, list(job.msg.get("own_kernels") or []), s, corr.notes,
                              job.seed, job.device)
        if cand.pure:  # its torch ops and library kernels are what "no kernel of its own" already says
            for f in audit:
                if f.rule in PURE_COVERED:
                    f.severity = "warn"
        findings += audit
    if cand.call.changed:  # a switch flipped inside forward (after ModelNew was built): judged as one set at import
        findings += gs.state_findings(cand.state, cand.call.changed[-1], " inside forward", rules)
        cand.state = cand.call.state
    out["correctness"] = asdict(corr)
    _judge_and_time(job, cand, compiled, corr, findings, watch, out)
    if rules.kernelbench:
        with _phase(job.phases, "kernelbench"):
            out["kernelbench"] = kb_score.score(state, cand.module, rules, s, job.device, job.timed,
                                                worker.initial_state, cand.state)
    out["flags"] += _check_flags(corr)
    exit_after = False
    if threads.thread_findings(threads0, threads.ThreadSnapshot.take(), native=False) or worker.identities.changed():
        exit_after = True  # never reuse a process a candidate has changed
    out["findings"] = [asdict(f) for f in findings]
    out["exit"] = exit_after
    return out


def _load(job: _Job, sample: Inputs, rules: Rules, findings: list[Finding]) -> _Candidate:
    """Import the candidate's module and build ModelNew (the import phase), judge the global state it left, say
    when it is a PyTorch rewrite, and (Triton) warm it up: what the build could not compile ahead compiles here."""
    import torch

    worker, msg = job.worker, job.msg
    compile_hook.install_dynamo()  # again: torch._dynamo.reset() between problems drops its callbacks
    if msg.get("kind") == "cute":  # its cute.compile calls: build time, cached across workers (cute_hook.py)
        cute_hook.install(str(msg.get("candidate_dir") or ""))
    with _phase(job.phases, "import", msg["candidate_model"]):
        module = worker.import_candidate(msg["candidate_model"])
        findings += worker.identities.findings("while the candidate module was imported")
        model, weights = worker.build_model(module, job.state, job.seed)
    cand_state, more, call = gs.candidate_state(worker.initial_state, model, rules)
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
    if msg.get("warmup"):  # Triton, CuTe: what the build could not compile ahead compiles (autotunes) here,
        with _phase(job.phases, "build_warmup"), cute_hook.warming_up():  # before any check or timer; its
            with torch.no_grad():  # seconds count as build time (a CuTe compile's are not counted twice)
                call(*clone_inputs(sample))
            if job.cuda:
                torch.cuda.synchronize()
    return _Candidate(module, model, weights, call, cand_state, pure)


def _verify(job: _Job, cand: _Candidate, sample: Inputs, findings: list[Finding]) -> Correctness:
    """The verify phase: every trial and shape set with the allocator poisoned (at least as many bytes as four
    times the largest input), and the findings of a replayed or reused output."""
    import torch

    s, state = job.s, job.state
    shape_sets: list[tuple[str, ShapeSet | None]] = [("default", None)]
    shape_sets += [(e["name"], e) for e in s.extra_shapes or []]
    poison = max(int(s.poison_bytes) or 0, 64 << 20)
    for x in sample:
        if isinstance(x, torch.Tensor):
            poison = max(poison, 4 * x.numel() * x.element_size())
    replay: list[str] = []
    reused: list[str] = []
    model = cand.model
    keep = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    with _phase(job.phases, "verify"):
        corr = vf.verify(cand.call, state.reference, job.tol, trials=int(s.trials),
                         distributions=list(s.distributions or ["normal"]), seed=job.seed, device=job.device,
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
    return corr


def _judge_and_time(job: _Job, cand: _Candidate, compiled: Forward | None, corr: Correctness,
                    findings: list[Finding], watch: threads.ThreadWatch, out: dict[str, Any]) -> None:
    """The status from the findings and the check (a reject finding before a failed check), and the timing of a
    candidate that is ok, or rejected only for what its timing still measures, in a GPU benchmark."""
    # a PyTorch rewrite is rejected and timed anyway: what its claimed speed-up is made of
    timed_anyway = all(f.rule in TIMED_ANYWAY or (cand.pure and f.rule in PURE_COVERED | {"no-kernel"})
                       for f in findings if f.severity == "reject")
    if _rejects(findings):
        out["status"] = "rejected"
    elif not corr.passed:
        out["status"] = "incorrect"
    if not (corr.passed and (out["status"] == "ok" or timed_anyway) and job.timed):
        return
    if job.stage and out["status"] == "ok" and not watch.started and not compile_hook.pending():
        _stage_test(job, corr, findings, out)
    # the thread hook stops here: the compiled baseline may start helper threads if it ever recompiles;
    # threads the candidate leaves running are still caught by the snapshot after timing
    watch.__exit__(None, None, None)
    with _phase(job.phases, "timing"):
        # no guard's host time if needless
        timed_call: Forward = cand.call if cand.call.state != job.worker.initial_state else cand.model
        perf, sol, flags, timed = benchmark(job.worker, job.state, timed_call, compiled, job.s, job.tol,
                                            job.msg.get("baseline"), train=cand.model if job.train else None)
    findings += timed
    out["performance"], out["speed_of_light"] = perf, sol
    out["flags"] += flags
    if _rejects(timed):
        out["status"] = "rejected"


def _check_flags(corr: Correctness) -> list[str]:
    """The verdict's flags from the check itself."""
    flags = []
    if corr.discriminates is False:
        flags.append("this problem cannot discriminate: a zero or constant output passes its check")
    if corr.deterministic is False:
        flags.append("non-deterministic: two runs on the same inputs differ bitwise")
    return flags


def _stage_test(job: _Job, corr: Correctness, findings: list[Finding], out: dict[str, Any]) -> None:
    """Send the caller this benchmark's test verdict before the timing starts: verified and audited exactly as a
    test request is (same seed, trials and checks), so a pairing session draws it at once and the benchmark does
    not verify the candidate a second time (protocol.TESTED)."""
    part = {"status": "ok", "error": "", "correctness": out["correctness"], "findings": [asdict(f) for f in findings],
            "flags": out["flags"] + _check_flags(corr), "phases": dict(job.phases)}
    watchdog.announce({"op": protocol.TESTED, "ok": True, "verdict": part})
