"""Record torch.compile's output for a problem on the GPU: the code, the launch config each kernel's
autotuner chose, which parameter, buffer, attribute or input each graph input is (observed, by
address), and the source of the torch runtime modules the kernels import (``triton_helpers``, whose
``libdevice``/``math`` come through ``triton_compat``), so that conversion on any machine, with any
torch, uses the recording torch's helpers.

``record(problem, compile_mode)`` runs ``python -m kernelpilot.inductor.generate`` in a subprocess (a
GPU, torch and triton needed; nothing is imported here) and returns ``Recording`` or raises
``ConversionError`` saying why not. ``inductor_candidate(problem, directory)`` records and converts.

The recording (JSON, also what batch.py stores per problem): ``graphs`` (one ``{code, configs,
sources}`` per Inductor graph, in the order torch.compile ran them: none when dynamo compiled nothing
and torch.compile's run is eager; several after graph breaks), ``code``/``configs``/``sources`` (the
graph, when there is exactly one), ``breaks`` (dynamo's graph-break reasons), ``torch``, ``runtime``
(module name -> source), ``compile_s``, ``peak_bytes``, and ``error`` when torch.compile failed.
Recordings made before this format said ``error: NO_GRAPH`` for no graph and had no ``runtime``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.inductor.c0 import candidate_from_recording, write_candidate
from kernelpilot.inductor.facts import plain_tensors
from kernelpilot.inductor.helpers import ConversionError, config_dict, runtime_sources
from kernelpilot.problem import load_problem, make_inputs

MARKER = "KERNELPILOT_INDUCTOR_RECORDING "
# what older recordings said instead of graphs: []
NO_GRAPH = "torch.compile produced no Inductor graph for this problem"


@dataclass
class Recording:
    code: str  # the one graph's code ("" when there are none or several: see data["graphs"])
    configs: dict[str, Any]  # kernel name -> {"kwargs", "num_warps", "num_stages"}
    sources: list[str] | None  # graph input i -> "x" / "self.linear.weight" (None: match by shape)
    torch: str
    data: dict[str, Any] = field(default_factory=dict)  # the whole recording (candidate_from_recording)


def recording_env() -> dict[str, str]:
    """The environment a recording subprocess runs in."""
    env = dict(os.environ)
    env.pop("TORCH_LOGS", None)
    # Inductor's output code is captured as it is generated: a graph served from the FX graph cache would
    # not be seen
    env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    return env


def parse_output(stdout: str) -> dict[str, Any] | None:
    """The recording printed by the subprocess, or None when it printed none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            return dict(json.loads(line[len(MARKER):]))
    return None


def record(problem: str | Path, compile_mode: str = "default", timeout_s: float = 600) -> Recording:
    try:
        proc = subprocess.run([sys.executable, "-m", "kernelpilot.inductor.generate", str(Path(problem).resolve()),
                               compile_mode], capture_output=True, text=True, timeout=timeout_s, env=recording_env(),
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ConversionError(f"torch.compile did not finish within {timeout_s:.0f} s") from None
    data = parse_output(proc.stdout)
    if data is None:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ConversionError(f"recording torch.compile's output failed (exit {proc.returncode}):\n{tail}")
    if data.get("error") and data["error"] != NO_GRAPH:
        raise ConversionError(data["error"])
    graphs = data.get("graphs") or []
    one = graphs[0] if len(graphs) == 1 else {}
    return Recording(one.get("code", ""), one.get("configs") or {}, one.get("sources"), data.get("torch", ""), data)


def inductor_candidate(problem: str | Path, directory: str | Path, compile_mode: str = "default") -> Any:
    """Record on the GPU, convert, write into ``directory``; returns the Conversion."""
    rec = record(problem, compile_mode)
    conversion = candidate_from_recording(problem, rec.data)
    write_candidate(directory, conversion)
    return conversion


# ---- subprocess side -------------------------------------------------------------------------------
def _compiled_graph_class() -> Any:
    for name in ("torch._inductor.output_code", "torch._inductor.codecache"):
        try:
            module = __import__(name, fromlist=["CompiledFxGraph"])
        except ImportError:
            continue
        if hasattr(module, "CompiledFxGraph"):
            return module.CompiledFxGraph
    raise ConversionError("this torch has no CompiledFxGraph: cannot observe Inductor's launches")


def _namespaces(fn: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The module globals behind Inductor's callable (through bound methods, wrappers and closures)."""
    if fn is None or depth > 3:
        return []
    fn = getattr(fn, "__func__", fn)
    found = [fn.__globals__] if hasattr(fn, "__globals__") else []
    for inner in [getattr(fn, "__wrapped__", None), getattr(fn, "func", None)] + \
            [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _filled(c)]:
        if callable(inner):
            found += _namespaces(inner, depth + 1)
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _since_launch() -> float | None:
    """Seconds since the parent started this process (KERNELPILOT_LAUNCHED, its time.time())."""
    import time

    try:
        return round(time.time() - float(os.environ["KERNELPILOT_LAUNCHED"]), 3)
    except (KeyError, ValueError):
        return None


def _lock_benchmarking() -> dict[str, float]:
    """Inductor's kernel timing (its autotuner's benchmarks) under the file lock KERNELPILOT_BENCH_LOCK
    names, which every recording process of one batch shares: a kernel timed while another process's
    kernels hold the GPU is timed wrong, and its autotuner would choose another config than torch.compile
    alone on the GPU. Returns the seconds waited for and held, filled in as it runs."""
    import fcntl
    import time

    path = os.environ.get("KERNELPILOT_BENCH_LOCK")
    stats = {"bench_wait_s": 0.0, "bench_s": 0.0}
    if not path:
        return stats
    try:
        from torch._inductor.runtime import benchmarking
    except ImportError:
        return stats
    target = getattr(benchmarking, "benchmarker", None)
    if target is None:
        return stats
    depth = [0]
    handle = open(path, "a+")  # noqa: SIM115 - held for the process's life

    def locked(fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return fn(*args, **kwargs)
            t0 = time.monotonic()
            fcntl.flock(handle, fcntl.LOCK_EX)
            t1 = time.monotonic()
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                fcntl.flock(handle, fcntl.LOCK_UN)
                stats["bench_wait_s"] = round(stats["bench_wait_s"] + t1 - t0, 3)
                stats["bench_s"] = round(stats["bench_s"] + time.monotonic() - t1, 3)

        return run

    for name in ("benchmark", "benchmark_gpu"):
        method = getattr(target, name, None)
        if callable(method):
            setattr(target, name, locked(method))
    return stats


def _main(problem: str, mode: str) -> dict[str, Any]:
    import inspect

    import torch
    from torch._inductor.utils import run_and_get_code

    timings = {"imported_s": _since_launch()}
    if not torch.cuda.is_available():
        return {"error": "no CUDA GPU is visible, so torch.compile cannot generate its Triton kernels here"}
    module = load_problem(problem).load_module()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    with torch.device("cuda"):
        torch.manual_seed(0)
        inputs = list(make_inputs(module))
    timings["ready_s"] = _since_launch()
    bench = _lock_benchmarking()
    graph = _compiled_graph_class()
    seen: list[tuple[Any, list[Any]]] = []
    original = graph.__call__

    def observe(self: Any, args: list[Any]) -> Any:
        seen.append((self, list(args)))
        return original(self, args)

    graph.__call__ = observe
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    import time

    torch.cuda.reset_peak_memory_stats()
    started = time.monotonic()
    try:
        with torch.no_grad():
            _, codes = run_and_get_code(torch.compile(model, mode=None if mode == "default" else mode), *inputs)
    finally:
        graph.__call__ = original
    compile_s = round(time.monotonic() - started, 3)
    timings.update(bench)
    peak = int(torch.cuda.max_memory_allocated())
    breaks = sorted({str(reason) for reason in counters.get("graph_break", {})})
    common = {"torch": torch.__version__, "breaks": breaks, "compile_s": compile_s, "peak_bytes": peak,
              "runtime": runtime_sources(), "timings": timings}
    if len(codes) < 1 or len(seen) < 1:  # dynamo compiled nothing: torch.compile's run is eager
        return {"graphs": [], **common}
    names = [p for p in inspect.signature(model.forward).parameters]
    where = {}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            where[(x.data_ptr(), tuple(x.shape))] = names[i] if i < len(names) else f"input{i}"
    state = ([(n, t, "parameter") for n, t in model.named_parameters()]
             + [(n, t, "buffer") for n, t in model.named_buffers()])
    for name, t, kind in state:
        expr = f"self.{name}" if all(p.isidentifier() for p in name.split(".")) else f"self.get_{kind}({name!r})"
        where.setdefault((t.data_ptr(), tuple(t.shape)), expr)
    for expr, (_, _, t) in plain_tensors(model).items():  # self.hidden = torch.randn(...): neither
        where.setdefault((t.data_ptr(), tuple(t.shape)), expr)
    graphs = []
    for code, (compiled, args) in zip(codes, seen):
        graphs.append({"code": code, "configs": _configs(compiled, config_dict),
                       "sources": _sources(args, where, torch)})
    if len(graphs) != 1:
        return {"graphs": graphs, **common}
    configs, sources = graphs[0]["configs"], graphs[0]["sources"]
    return {"code": codes[0], "configs": configs, "sources": sources, "graphs": graphs, **common}


def _configs(compiled: Any, config_dict: Any) -> dict[str, Any]:
    """The launch config each kernel of one compiled graph ran with (its autotuner's choice)."""
    configs = {}
    for namespace in _namespaces(compiled.current_callable):
        for value in list(namespace.values()):
            launchers = getattr(value, "launchers", None)
            if launchers and hasattr(launchers[0], "config"):
                name = (getattr(value, "inductor_meta", None) or {}).get("kernel_name") or value.fn.__name__
                configs[name] = config_dict(launchers[0].config)
    return configs


def _sources(args: list[Any], where: dict[Any, str], torch: Any) -> list[str] | None:
    """Which parameter or forward input each graph input is (by address); None when one is neither."""
    sources: list[str] = []
    for a in args:
        key = (a.data_ptr(), tuple(a.shape)) if isinstance(a, torch.Tensor) else None
        if key not in where:  # copied on the way in (alignment): the converter matches by shape instead
            return None
        sources.append(where[key])
    return sources


if __name__ == "__main__":
    try:
        result = _main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "default")
    except Exception as exc:  # noqa: BLE001 - reported to the caller as a ConversionError
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(MARKER + json.dumps(result), flush=True)
