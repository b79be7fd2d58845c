"""The worker's problem cache: one problem at a time (its model, float64 copy, compiled baseline), and
what a problem and a candidate can fail with before any check runs. A mixin of ``worker.Worker``
(split from worker.py; the worker process imports it).

Loading a problem drops every earlier one first and gives its memory back (``forget_problems``), so a
warm worker that judges many problems never holds two problems' tensors; a problem whose own eager call
does not fit the GPU with nothing else held raises ``ProblemTooLarge``.
"""

from __future__ import annotations

import copy
import hashlib
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import kernelpilot.problem as problem_files
from kernelpilot.evaluation.correctness.inputs import Inputs, draw_inputs, problem_dtype
from kernelpilot.evaluation.correctness.reference import Forward, Reference
from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache
from kernelpilot.evaluation.kernelbench.inputs import KernelBenchInputs
from kernelpilot.evaluation.settings import settings_of
from kernelpilot.evaluation.timing import gpu_lock
from kernelpilot.evaluation.worker import memory
from kernelpilot.rules import get_rules

if TYPE_CHECKING:
    import torch


class CandidateError(Exception):
    """The candidate cannot be evaluated (no ModelNew, parameters that do not match Model)."""


class ProblemTooLarge(Exception):
    """The problem's own eager call does not fit the GPU with nothing else held: a fact about the
    problem (status problem_too_large), never about the candidate."""


@dataclass
class ProblemState:
    key: str
    module: ModuleType
    init_inputs: Inputs
    reference: Reference
    dtype: torch.dtype
    compiled: Forward | None = None
    compile_note: str = ""
    compiled_check: str = ""  # torch.compile's output through the candidates' check, once (compiled_check.py)
    compiled_backward: str | None = None  # its backward built for a training step: None not tried, "" built, or why not
    info: dict[str, Any] | None = None  # the problem's analysis (bytes moved, flops): analysis() makes it once
    path: str = ""  # the problem file, for analysis()
    reference_s: float = 0.0  # one warm call of the reference, synchronised: the watchdog's yardstick
    input_bytes: int = 0  # one input set
    call_bytes: int = 0  # what one eager call allocates at its peak (outputs and temporaries)
    references: ReferenceCache | None = None  # reference outputs per input seed, between edits
    kb_inputs: KernelBenchInputs | None = None  # KernelBench's input sets per seed, between candidates

    def analysis(self, known: dict[str, Any] | None = None) -> dict[str, Any]:
        """The problem's analysis on the meta device (bytes moved, flops, flops by op; or a note why not),
        what the speed of light needs: ``known`` (the one the shared baselines carry) when given, else made
        here once, on first use (a recurrent problem's takes seconds: a verdict that is never timed, or one
        whose baselines carry it, does not pay for it)."""
        if known and self.info is None:
            self.info = dict(known)
        if self.info is None:
            try:
                info = problem_files.analyse(problem_files.load_problem(Path(self.path)), device="meta")
                self.info = {"bytes_moved": info.bytes_moved, "flops": info.flops, "flops_by_op": info.flops_by_op}
            except Exception as exc:  # noqa: BLE001 - the speed of light is then unavailable, and says why
                self.info = {"note": f"problem analysis failed ({type(exc).__name__}: {exc})"}
        return self.info


def compile_failure(exc: BaseException) -> str:
    """Why the torch.compile baseline could not be built: the exception and the innermost cause
    (Inductor wraps a compile subprocess's error in SubprocException; the first line alone says nothing)."""
    inner: BaseException = exc
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    text = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    if inner is not exc:
        text += f" <- {type(inner).__name__}: {str(inner).strip()[:300]}"
    return f"torch.compile baseline failed ({text})"


def gpu_shared_backend(mode: str) -> Callable[[torch.fx.GraphModule, list[torch.Tensor]], Forward]:
    """torch.compile's own backend for ``mode`` (``torch._TorchCompileInductorWrapper``, what
    ``torch.compile(model, mode=mode)`` uses), whose compiled graphs run under this process's GPU lock,
    shared: compiling (CPU work) never holds the GPU, running and autotuning never overlaps a timing."""
    import torch

    inductor = torch._TorchCompileInductorWrapper(None if mode == "default" else mode, None, None)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Forward:
        compiled = inductor(gm, example_inputs)

        def run(*args: Any) -> Any:
            with gpu_lock.current().shared():
                return compiled(*args)

        for name in ("_boxed_call",):  # how dynamo calls it (one list of arguments, or the arguments)
            if hasattr(compiled, name):
                setattr(run, name, getattr(compiled, name))
        return run

    return backend


def kernelbench_failure(msg: dict[str, Any], imported: bool, message: str, constructing: bool = False,
                         runtime: bool = True) -> dict[str, Any] | None:
    """Under a KernelBench preset, KernelBench's status of a candidate our evaluation stopped with an
    exception: compile_error when its module did not even import (KernelBench's compiled=False), or when
    ``ModelNew(...)`` raised anything but a RuntimeError (it escapes eval_kernel_against_ref, and KernelBench's
    batch scorer records it as compiled=False); runtime_error otherwise."""
    try:
        rules = get_rules(settings_of(msg).rules)
    except Exception:  # noqa: BLE001
        return None
    if rules.harness is None:
        return None
    compiled = imported and not (constructing and not runtime)
    return {"preset": rules.harness.version, "commit": rules.harness.commit, "compiled": compiled,
            "status": "runtime_error" if compiled else "compile_error", "error": message[:400]}


class ProblemCache:
    """Problem loading for Worker (its ``device`` and ``problems`` are set by Worker.__init__)."""

    device: str
    problems: dict[str, "ProblemState"]
    dynamo_reset: bool

    def problem_state(self, path: str, seed: int) -> ProblemState:
        import torch

        p = Path(path).resolve()
        # the bytes and the seed too: the reference (and the outputs it keeps) are those of this file as
        # it is now, built after this seed (a rewrite within the file system's mtime resolution is seen)
        digest = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        key = f"{p}:{p.stat().st_mtime_ns}:{digest}:{seed}:{self.device}"
        if key in self.problems:
            return self.problems[key]
        self.forget_problems()  # everything the last problem made is gone before this one's tensors exist
        module = problem_files.load_problem(p).load_module()
        torch.manual_seed(seed)
        init_inputs = list(module.get_init_inputs())
        message = ""
        try:
            torch.manual_seed(seed)
            model = module.Model(*init_inputs).to(self.device).eval()
            sample = draw_inputs(module, seed, "native", self.device)
            reference_s, call_bytes = self._time_reference(model, sample)
        except torch.cuda.OutOfMemoryError as exc:
            message = str(exc).splitlines()[0][:300]
        if message:  # nothing else is held here: the problem's own eager call does not fit this GPU
            self.forget_problems()
            raise ProblemTooLarge(f"one eager call of the problem's Model does not fit in this GPU's memory with "
                                  f"nothing else held ({message})")
        model64: torch.nn.Module | None = None
        try:
            model64 = copy.deepcopy(model).double().eval()
        except Exception:  # noqa: BLE001 - no float64 copy (it does not fit, or a module refuses): dtype reference
            model64 = None
        state = ProblemState(key, module, init_inputs, Reference(model, model64, module),
                             problem_dtype(sample, model), path=str(p))
        state.input_bytes = sum(x.numel() * x.element_size() for x in sample if isinstance(x, torch.Tensor))
        state.reference_s, state.call_bytes = reference_s, call_bytes
        state.references = ReferenceCache(self.device)
        del sample
        self.problems[key] = state
        return state

    def _time_reference(self, model: torch.nn.Module, sample: Inputs) -> tuple[float, int]:
        """Seconds of one warm reference call (after a warm-up call), device synchronised, and the bytes
        that call allocates at its peak (outputs and temporaries; what the memory plan sizes by)."""
        import torch

        seconds, peak = 0.0, 0
        cuda = self.device.startswith("cuda")
        with torch.no_grad():
            for _ in range(2):
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    before = torch.cuda.memory_allocated()
                t0 = time.perf_counter()
                out = model(*sample)
                if cuda:
                    torch.cuda.synchronize()
                    peak = max(peak, int(torch.cuda.max_memory_allocated() - before))
                seconds = time.perf_counter() - t0
                del out
        return seconds, peak

    def forget_problems(self) -> None:
        """Drop every cached problem (models, float64 copies, compiled baselines) and give their memory
        back, so the next problem starts on an empty device."""
        import torch

        had_compiled = any(st.compiled is not None for st in self.problems.values())
        for st in self.problems.values():
            if st.references is not None:
                st.references.clear()  # the kept reference outputs' device memory, even if a state lingers
            if st.kb_inputs is not None:
                st.kb_inputs.clear()
        self.problems.clear()
        if had_compiled:
            torch._dynamo.reset()  # the compiled baseline's graphs, guards and code caches
        memory.release(self.device)

    def compiled(self, state: ProblemState, mode: str, sample: Callable[[], Inputs]) -> Forward | None:
        """torch.compile's build of the problem's model, compiled once per problem (or its failure noted once);
        ``sample`` draws the inputs of the first call only when this call compiles."""
        import torch

        if state.compiled is None and not state.compile_note:
            if not self.dynamo_reset:
                torch._dynamo.reset()
                self.dynamo_reset = True
            try:
                fn = torch.compile(state.reference.model, backend=gpu_shared_backend(mode))
                with torch.no_grad():
                    fn(*sample())  # compile now, before any candidate code is in the process
                torch.cuda.synchronize()
                state.compiled = fn
            except Exception as exc:
                state.compile_note = compile_failure(exc)
                print(f"kernelpilot-worker: {state.compile_note}\n{traceback.format_exc()[-6000:]}", file=sys.stderr,
                      flush=True)  # the whole of Inductor's error, in the log
        return state.compiled

