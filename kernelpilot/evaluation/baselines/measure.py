"""What the problem costs today on this GPU: eager and torch.compile times, and the speed of light.

``answer(worker, msg)`` runs inside the evaluation worker (op ``baselines``): it times the
problem's reference model and its torch.compile build with the engine's own timing (``timing.measure``,
interleaved, behind a GPU spin, L2 flushed, the same input pool and settings as a candidate's
benchmark) and adds the GPU's measured ceilings, so the floor and the share of it each baseline
reaches use the same numbers as the verdicts that follow. The compiled baseline stays cached in the
worker, so the first benchmark of a candidate does not compile it again.

``Baselines`` is the answer as plain data (``Evaluator.baselines(problem)`` returns it); importing
this module imports neither torch nor CUDA.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kernelpilot.evaluation import supersede
from kernelpilot.evaluation.baselines.identity import nvml_facts
from kernelpilot.evaluation.baselines.values import Baselines, software_versions  # noqa: F401 - measure's names too
from kernelpilot.evaluation.correctness import compiled_check
from kernelpilot.evaluation.correctness.compare import dtype_name
from kernelpilot.evaluation.correctness.inputs import Inputs, draw_inputs
from kernelpilot.evaluation.settings import settings_of
from kernelpilot.evaluation.timing import candidate as engine
from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.timing import interleaved as tm
from kernelpilot.evaluation.timing.speed_of_light import for_problem
from kernelpilot.evaluation.worker import watchdog
from kernelpilot.evaluation.worker.pipeline import tolerance_for
from kernelpilot.evaluation.worker.start_steps import StartSteps

if TYPE_CHECKING:
    from kernelpilot.evaluation.correctness.reference import Forward
    from kernelpilot.evaluation.settings import EvalSettings
    from kernelpilot.evaluation.worker.interface import BaselineWorker
    from kernelpilot.evaluation.worker.problem_state import ProblemState


def answer(worker: BaselineWorker, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker's answer to ``{"op": "baselines", "problem": PATH, "settings": {...}}``: ``ok`` and
    ``baselines``, or ``ok: False`` and ``error`` (with ``exit`` when the CUDA context is unusable, ``superseded``
    when a save cancelled them at an announcement)."""
    try:
        return measure(worker, msg)
    except supersede.Superseded:  # a pairing session's save came first: measured again after its verdict
        return {"ok": False, "superseded": True, "error": "superseded: a save came first"}
    except Exception as exc:  # the problem's own code failed on the GPU: say so, keep the worker if healthy
        message, fatal = worker.classify(exc)
        return {"ok": False, "error": message.splitlines()[0] if message else type(exc).__name__, "exit": fatal}


def measure(worker: BaselineWorker, msg: dict[str, Any]) -> dict[str, Any]:
    """With ``msg["exclusive"]`` (a problem so large that it must not share the GPU's memory with a
    candidate being verified) the whole measurement holds the GPU lock exclusively; otherwise loading
    the problem and torch.compile's runs hold it shared, its compiling none, and the timing exclusively."""
    if msg.get("exclusive"):
        t0 = time.monotonic()
        with gpu_lock.current().exclusive():
            result = _measure(worker, msg)
        if result.get("ok"):
            result["baselines"]["exclusive_s"] = round(time.monotonic() - t0, 3)
        return result
    return _measure(worker, msg)


def _measure(worker: BaselineWorker, msg: dict[str, Any]) -> dict[str, Any]:
    t0 = time.monotonic()
    s = settings_of(msg)
    device = worker.device
    seed = int(s.seed)
    watchdog.begin(watchdog.Allowance.from_settings(s))
    watchdog.step("problem")  # the first announcement: a pairing session's save may stop them here already
    if not device.startswith("cuda"):
        return {"ok": False, "error": "eager and torch.compile timings need a CUDA GPU"}
    lock = gpu_lock.current()
    steps = StartSteps()  # where the measurement's seconds go (Baselines.steps)
    with lock.shared():  # the problem's model and one eager call: GPU work, not timed
        state = worker.problem_state(msg["problem"], seed)
    steps.mark("problem")
    watchdog.set_reference_seconds(state.reference_s)  # the timed rounds get the eager-based allowance
    watchdog.step("compile_baseline")
    mode = str(s.compile_mode)
    out = Baselines(compile_mode=mode, gpu=str(worker.environment().get("gpu", "")))
    impls: dict[str, Forward] = {"eager": state.reference.model}
    out.gpu_uuid, out.driver, out.torch, out.clocks = gpu_fingerprint(device)
    out.triton, out.cuda = software_versions()
    if s.compile_baseline:
        started = time.monotonic()
        compiled = _compiled(worker, state, s)
        out.compile_s = round(time.monotonic() - started, 3)
        steps.mark("compile")
        if compiled is not None:
            impls["compiled"] = compiled
            if not msg.get("check_later"):  # a pairing session asks for the check after the card's times (check_answer)
                out.compiled_check = _check(worker, state, s, compiled)
                steps.mark("check")
        else:
            out.compiled_missing = state.compile_note or "torch.compile produced nothing to time"
            out.notes.append(out.compiled_missing)
    with lock.shared():
        pool, refill = engine.input_pool(state, s, device)
    steps.mark("pool")
    with lock.exclusive():  # a timing: nothing else on this GPU meanwhile
        held = time.monotonic()
        run = tm.measure(impls, pool, refill, engine.timing_settings(s, state.reference_s), worker.pristine, device)
        out.exclusive_s = round(time.monotonic() - held, 3)
    steps.mark("timing")
    del pool, refill
    out.notes += run.notes
    out.eager, out.compiled = run.timings["eager"], run.timings.get("compiled")
    ceil = worker.ceilings
    if ceil is None:
        out.notes.append(f"speed of light unavailable: {worker.ceilings_note or 'no measured ceilings'}")
    else:
        out.ceilings = asdict(ceil)
        out.problem_info = state.analysis()
        sol = for_problem(out.problem_info, str(state.dtype), ceil, worker.initial_state,
                          candidate_ms=None, compiled_ms=out.compiled.median_ms if out.compiled else None)
        out.speed_of_light = sol
        if sol.floor_ms and out.eager.median_ms > 0:
            out.eager_pct_of_ceiling = 100.0 * sol.floor_ms / out.eager.median_ms
    steps.mark("ceiling")
    out.steps = steps.steps
    out.seconds = round(time.monotonic() - t0, 3)
    if msg.get("forget"):  # the baseline service's worker: nothing of this problem stays on the GPU
        del impls, state
        worker.forget_problems()
    return {"ok": True, "baselines": out.to_dict()}


def _compiled(worker: BaselineWorker, state: ProblemState, s: EvalSettings) -> Forward | None:
    """torch.compile's build of the problem's model, compiled once per problem in this worker (its sample input
    drawn only then)."""

    def sample() -> Inputs:
        with gpu_lock.current().shared():
            return draw_inputs(state.module, int(s.seed) + 500, "normal", worker.device)

    return worker.compiled(state, str(s.compile_mode), sample)  # its graphs' runs take the lock shared themselves


def _check(worker: BaselineWorker, state: ProblemState, s: EvalSettings, compiled: Forward) -> str:
    """torch.compile's own check: the candidates' check, once per problem, shared with their verdicts."""
    with gpu_lock.current().shared():
        return compiled_check.once(state, compiled, tolerance_for(s, dtype_name(state.dtype)), s, worker.device)


def check_answer(worker: BaselineWorker, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker's answer to ``{"op": "compiled_check", "problem": PATH, "settings": {...}}``: torch.compile's own
    check of the problem, asked by a pairing session after its baselines were answered without it (``check_later``:
    the card's times do not wait for it). ``ok`` and ``compiled_check`` ("" when torch.compile built nothing), or
    ``superseded`` when a save came first: that save's benchmark verdict makes the check itself."""
    try:
        s = settings_of(msg)
        watchdog.begin(watchdog.Allowance.from_settings(s))
        watchdog.step("problem")
        if not s.compile_baseline:
            return {"ok": True, "compiled_check": ""}
        with gpu_lock.current().shared():
            state = worker.problem_state(msg["problem"], int(s.seed))
        watchdog.set_reference_seconds(state.reference_s)  # the check's calls get the allowance the baselines' get
        watchdog.step("compile_baseline")
        compiled = _compiled(worker, state, s)
        watchdog.step("compile_check")
        return {"ok": True, "compiled_check": _check(worker, state, s, compiled) if compiled is not None else ""}
    except supersede.Superseded:
        return {"ok": False, "superseded": True, "error": "superseded: a save came first"}
    except Exception as exc:  # the problem's own code failed: say so, keep the worker if healthy
        message, fatal = worker.classify(exc)
        return {"ok": False, "error": message.splitlines()[0] if message else type(exc).__name__, "exit": fatal}


def gpu_fingerprint(device: str) -> tuple[str, str, str, dict[str, int]]:
    """(GPU UUID, driver, torch version, clocks) of the device the worker times on: a stored baseline is
    valid only where all four match (identity.nvml_facts reads the driver and clocks)."""
    import torch

    index = torch.device(device).index or 0
    uuid = ""
    try:
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
    except Exception:  # noqa: BLE001
        pass
    driver, clocks = nvml_facts(uuid, index)
    return uuid, driver, torch.__version__, clocks
