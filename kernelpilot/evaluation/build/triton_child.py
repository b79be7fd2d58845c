"""The child side of a Triton candidate's build step (triton_ahead.py): ModelNew's forward run once on fake CUDA
tensors with Triton's launcher replaced, so that every launch is compiled for the target GPU and nothing runs;
compile errors at the kernel's line, registers and spills per kernel, one result line for the parent.

python -m kernelpilot.evaluation.build.triton_child MODEL_FILE PROBLEM CAPABILITY"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from kernelpilot.evaluation.forks import end_child, fork_quietly

if TYPE_CHECKING:  # torch and Triton are imported in the child's run, not here
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.compiler import CompiledKernel

RESULT_MARKER = "KERNELPILOT_TRITON_RESULT "  # the line of the parent's answer (triton_ahead.py reads it)


# ---- child side ------------------------------------------------------------------------------------
class _AheadDriver:
    """Triton's active driver while building: answers the target, device 0 and stream 0; never touches CUDA."""

    def __init__(self, target: GPUTarget, real: object) -> None:
        self.target = target
        self.real = real

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:  # anything else (benchmarking) needs the GPU
        raise RuntimeError(f"triton's driver.{name} needs a GPU; the build compiles without one")



class _Recorder:
    """Replaces JITFunction.run / Autotuner.run: compile (Triton's warmup path), record, launch nothing."""

    def __init__(self) -> None:
        self.kernels: dict[str, Any] = {}  # kernel name -> CompiledKernel (last specialisation)
        self.notes: list[str] = []
        self.current: list[Any] = []  # the JITFunction being compiled
        self.failed: list[Any] = []  # the JITFunction whose compilation raised (for error locations)

    def install(self) -> None:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction

        original = JITFunction.run
        recorder = self

        def run(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            recorder.current.append(fn)
            try:
                args = tuple(_pointer(a) for a in args)
                kwargs = {k: _pointer(v) for k, v in kwargs.items()}
                kernel = original(fn, *args, grid=grid, warmup=True, **kwargs)
            except BaseException:
                recorder.failed.append(fn)
                raise
            finally:
                recorder.current.pop()
            if kernel is not None:
                recorder.kernels[kernel.name] = kernel
            return None

        def tuned(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            kwargs.pop("warmup", None)
            grid = kwargs.pop("grid", None)
            tuner.nargs = dict(zip(tuner.arg_names, args))
            configs = tuner.prune_configs(kwargs)

            def compile_one(config: Any) -> None:
                tuner.fn.run(*args, grid=grid, warmup=True, **kwargs, **config.all_kwargs())

            apart = compile_configs(compile_one, configs)
            if len(configs) > 1:
                beside = f" ({apart} of them in forked processes, beside the first)" if apart else ""
                recorder.notes.append(f"{_name(tuner.fn)} is autotuned over {len(configs)} configs: each is compiled "
                                      f"here{beside}, the fastest is chosen by benchmarking at the worker's warm-up")
            tuner.nargs = None
            return None

        JITFunction.run = run  # type: ignore[method-assign]
        Autotuner.run = tuned  # type: ignore[method-assign]



def compile_configs(compile_one: Callable[[Any], None], configs: list[Any]) -> int:
    """Every config compiled, in order, by ``compile_one``; the configs after the first are compiled at the same time
    in forked copies of this process (the build never touches CUDA), so their kernels are in Triton's cache when
    their turn comes and load from it. Triton compiles one config at a time (an autotuned Inductor reduction: two,
    0.5-0.6 s each of a Triton edit's build). A config whose fork failed, did not compile (its error is raised here,
    where the recorder gives its line) or took too long is compiled in this process. Returns how many configs were
    compiled in forks."""
    forks = _fork(compile_one, configs[1:MAX_FORKS + 1])
    try:
        started = time.monotonic()
        for config in configs[:1]:
            compile_one(config)
        now = time.monotonic()
        deadline = now + (FORK_PATIENCE - 1) * (now - started) + FORK_GRACE_S
        compiled = 0
        for i, config in enumerate(configs[1:]):
            if i < len(forks):  # the fork's kernel first: then this call loads it from the cache
                compiled += _reap(forks[i], deadline)
            compile_one(config)
        return compiled
    finally:
        for pid in forks:  # a compile error above: the forks still running are not waited for
            _reap(pid, 0.0)


# forks at once besides the builder: the cores this process may run on, less its own
MAX_FORKS = max((len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2) - 1, 1)
FORK_PATIENCE = 3.0  # a fork may take this many times the first config's compile (more configs than cores)
FORK_GRACE_S = 5.0  # and this much longer


def _fork(compile_one: Callable[[Any], None], configs: list[Any]) -> list[int]:
    """One forked process per config, each compiling it and exiting (0: compiled); none where fork fails."""
    pids: list[int] = []
    for config in configs:
        try:
            pid = fork_quietly()  # the fork runs only Triton's compiler
        except OSError:  # not allowed here (the build's confinement): compiled in this process
            break
        if pid == 0:
            code = 1
            try:
                compile_one(config)
                code = 0
            except BaseException:  # noqa: BLE001 - compiled again in the parent, which reports it
                pass
            finally:
                os._exit(code)
        pids.append(pid)
    return pids


def _reap(pid: int, deadline: float) -> int:
    """1 when the fork ``pid`` compiled its config by ``deadline``; otherwise it is killed and 0."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped already
            return 0
        if done:
            return int(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)
        if time.monotonic() >= deadline:
            end_child(pid)
            return 0
        time.sleep(0.005)



class _Pointer:
    """What Triton's specialisation reads of a tensor argument: its dtype and its address's alignment."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.dtype = tensor.dtype
        self.shape = tuple(tensor.shape)
        self._strides = tuple(tensor.stride())
        self._address = 1024 + tensor.storage_offset() * tensor.element_size()  # allocations are 256-B aligned

    def data_ptr(self) -> int:
        return self._address

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def ptr_range(self) -> int:  # older Triton asks (32-bit pointer range); as its own MockTensor answers
        return 0



def _pointer(value: object) -> object:
    import torch

    return _Pointer(value) if isinstance(value, torch.Tensor) else value



def _name(fn: object) -> str:
    while hasattr(fn, "fn") and not hasattr(fn, "starting_line_number"):
        fn = fn.fn
    return str(getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "kernel"))



def _resources(kernel: CompiledKernel, cuobjdump: str | None) -> dict[str, Any]:
    """Registers and local memory of one compiled kernel (Triton's n_regs and n_spills x 4) from its cubin."""
    import subprocess
    import tempfile

    meta = kernel.metadata
    out: dict[str, Any] = {"kernel": kernel.name, "arch": f"sm_{meta.target.arch}", "shared_bytes": meta.shared}
    cubin = kernel.asm.get("cubin")
    if not cuobjdump or not cubin:
        return out
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        try:
            text = subprocess.run([cuobjdump, "-res-usage", fh.name], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return out
    match = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", text)
    if match:
        regs, stack, _, local = (int(g) for g in match.groups())
        out.update(registers=regs, stack_frame_bytes=stack, spill_stores_bytes=local)
    return out



def _error_location(exc: BaseException, recorder: _Recorder, model_file: Path) -> dict[str, Any]:
    """File and line of a Triton CompilationError (its node's line is relative to the kernel's def)."""
    import traceback

    node = getattr(exc, "node", None)
    src = getattr(exc, "src", None)
    if node is not None and hasattr(node, "lineno"):
        for fn in recorder.failed + _all_jit(model_file.parent):
            if not hasattr(fn, "starting_line_number"):
                continue
            if src is None or getattr(fn, "src", None) == src:
                file = getattr(getattr(fn, "fn", None), "__code__", None)
                return {"file": file.co_filename if file else str(model_file),
                        "line": _def_line(fn) + node.lineno - 1, "column": node.col_offset + 1}
    root = model_file.parent.resolve()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve().parent == root]
    if frames:
        return {"file": frames[-1].filename, "line": frames[-1].lineno}
    return {}



def _def_line(fn: object) -> int:
    """The file line of a JITFunction's ``def`` (its source, which error lines count from, starts there)."""
    if hasattr(fn, "def_file_line_number"):
        return int(fn.def_file_line_number)
    offset = next((i for i, line in enumerate(getattr(fn, "raw_src", [])) if line.strip().startswith("def ")), 0)
    return int(fn.starting_line_number) + offset



def _all_jit(directory: Path) -> list[Any]:
    from triton.runtime.jit import JITFunction

    out = []
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None) or ""
        if file and Path(file).resolve().parent == directory.resolve():
            out += [v for v in vars(module).values() if isinstance(v, JITFunction)]
    return out



def _message(exc: BaseException) -> str:
    text = getattr(exc, "error_message", None) or str(exc)
    return f"{type(exc).__name__}: {str(text).strip()}"[:4000]



def child(model_file: Path, problem: Path, capability: int) -> dict[str, Any]:
    import importlib.util

    import torch
    import triton
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    from kernelpilot.problem import load_problem, make_inputs

    result: dict[str, Any] = {"ok": False, "kernels": [], "diagnostics": []}
    driver.set_active(_AheadDriver(GPUTarget("cuda", capability, 32), None))
    recorder = _Recorder()
    recorder.install()
    module = load_problem(problem).load_module()
    sys.path.insert(0, str(model_file.parent))
    try:
        spec = importlib.util.spec_from_file_location("kp_triton_candidate", model_file)
        assert spec is not None and spec.loader is not None
        candidate = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = candidate
        spec.loader.exec_module(candidate)
    except Exception as exc:  # the module does not import: a build error, with its line
        result["diagnostics"].append({"severity": "error", "message": _message(exc), "tool": "python",
                                      **_error_location(exc, recorder, model_file)})
        return result
    fake = FakeTensorMode()
    try:
        with fake, torch.device("cuda"):
            torch.manual_seed(42)
            model = candidate.ModelNew(*module.get_init_inputs())
            torch.manual_seed(42)
            inputs = list(make_inputs(module))
        with fake, torch.device("cuda"), torch.no_grad():
            model(*inputs)
    except triton.CompilationError as exc:
        result["diagnostics"].append({"severity": "error", "message": _message(exc), "tool": "triton",
                                      **_error_location(exc, recorder, model_file)})
        return result
    except Exception as exc:  # ModelNew needs real data (item(), data-dependent shapes) or a GPU (streams)
        if type(exc).__name__ in ("PTXASError", "MLIRCompilationError") or "triton" in type(exc).__module__:
            result["diagnostics"].append({"severity": "error", "message": _message(exc), "tool": "triton",
                                          **_error_location(exc, recorder, model_file)})
            return result
        where = _error_location(exc, recorder, model_file)
        at = f" at {Path(where['file']).name}:{where['line']}" if where else ""
        recorder.notes.append(f"ModelNew does not run on fake tensors{at} ({_message(exc)[:300]}); the kernels "
                              "it launches after that point compile at the worker's warm-up")
    cuobjdump = None
    try:
        cuobjdump = triton.knobs.nvidia.cuobjdump.path
    except Exception:  # older triton: no knobs; the figures are then only the shared memory
        pass
    result["kernels"] = [_resources(k, cuobjdump) for k in recorder.kernels.values()]
    if not recorder.kernels and not recorder.notes:
        recorder.notes.append("no Triton kernel was launched by forward on fake tensors: they compile at the "
                              "worker's warm-up")
    result["diagnostics"] += [{"severity": "note", "message": n, "tool": "triton"} for n in recorder.notes]
    result["ok"] = True
    return result



def main(argv: list[str] | None = None) -> NoReturn:
    """Build, print the result line, and exit the process (never returns)."""
    import os

    from kernelpilot.evaluation.sandbox import build_step as build_sandbox

    args = sys.argv[1:] if argv is None else argv
    unconfined = ""
    try:  # before any of the candidate's code runs
        build_sandbox.apply(os.environ)
    except Exception as exc:  # noqa: BLE001 - said in the report; the build goes on as before
        unconfined = f"{type(exc).__name__}: {exc}"[:300]
    try:
        result = child(Path(args[0]).resolve(), Path(args[1]).resolve(), int(args[2]))
    except BaseException as exc:  # noqa: BLE001 - reported as the build's error, never a traceback only
        import traceback

        traceback.print_exc()
        result = {"ok": False, "diagnostics": [{"severity": "error", "message": _message(exc), "tool": "build"}]}
    if unconfined:
        result.setdefault("diagnostics", []).append({"severity": "note", "tool": "build", "message": (
            build_sandbox.unconfined_note(f"the builder could not confine itself: {unconfined}"))})
    sys.stdout.flush()
    print(RESULT_MARKER + json.dumps(result), flush=True)
    sys.stderr.flush()
    # nothing left to write (Triton wrote its cache as it compiled): the interpreter's teardown of torch and Triton
    # took 0.9 s after the result, every build (2-core CPU, 2026-12-07), and the caller waits for the exit
    os._exit(0 if result.get("ok") else 1)


if __name__ == "__main__":
    main()
