"""Record torch.compile's output for a problem on the GPU: the code, the launch config each kernel's
autotuner chose, and which parameter or input each graph input is (observed, by address).

``record(problem, compile_mode)`` runs ``python -m kernelpilot.inductor.generate`` in a subprocess (a
GPU, torch and triton needed; nothing is imported here) and returns ``Recording`` or raises
``ConversionError`` saying why not. ``inductor_candidate(problem, directory)`` records and converts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.inductor.helpers import ConversionError

MARKER = "KERNELPILOT_INDUCTOR_RECORDING "


@dataclass
class Recording:
    code: str
    configs: dict[str, Any]  # kernel name -> {"kwargs", "num_warps", "num_stages"}
    sources: list[str] | None  # graph input i -> "x" / "self.linear.weight" (None: match by shape)
    torch: str


def record(problem: str | Path, compile_mode: str = "default", timeout_s: float = 600) -> Recording:
    env = dict(os.environ)
    env.pop("TORCH_LOGS", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "kernelpilot.inductor.generate", str(Path(problem).resolve()),
                               compile_mode], capture_output=True, text=True, timeout=timeout_s, env=env,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ConversionError(f"torch.compile did not finish within {timeout_s:.0f} s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER):])
            if data.get("error"):
                raise ConversionError(data["error"])
            return Recording(data["code"], data["configs"], data["sources"], data["torch"])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise ConversionError(f"recording torch.compile's output failed (exit {proc.returncode}):\n{tail}")


def inductor_candidate(problem: str | Path, directory: str | Path, compile_mode: str = "default") -> Any:
    """Record on the GPU, convert, write into ``directory``; returns the Conversion."""
    from kernelpilot.inductor import candidate_from_code, write_candidate

    rec = record(problem, compile_mode)
    conversion = candidate_from_code(problem, rec.code, rec.configs, rec.sources)
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


def _main(problem: str, mode: str) -> dict[str, Any]:
    import inspect

    import torch
    from torch._inductor.utils import run_and_get_code

    from kernelpilot.inductor.helpers import config_dict
    from kernelpilot.problem import load_problem, make_inputs

    if not torch.cuda.is_available():
        return {"error": "no CUDA GPU is visible, so torch.compile cannot generate its Triton kernels here"}
    module = load_problem(problem).load_module()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    with torch.device("cuda"):
        torch.manual_seed(0)
        inputs = list(make_inputs(module))
    graph = _compiled_graph_class()
    seen: list[tuple[Any, list[Any]]] = []
    original = graph.__call__

    def observe(self: Any, args: list[Any]) -> Any:
        seen.append((self, list(args)))
        return original(self, args)

    graph.__call__ = observe
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            _, codes = run_and_get_code(torch.compile(model, mode=None if mode == "default" else mode), *inputs)
    finally:
        graph.__call__ = original
    if len(codes) != 1 or len(seen) < 1:
        return {"error": f"torch.compile produced {len(codes)} graphs (graph breaks); only one graph can be converted"}
    compiled, args = seen[0]
    configs = {}
    for namespace in _namespaces(compiled.current_callable):
        for value in list(namespace.values()):
            launchers = getattr(value, "launchers", None)
            if launchers and hasattr(launchers[0], "config"):
                name = (getattr(value, "inductor_meta", None) or {}).get("kernel_name") or value.fn.__name__
                configs[name] = config_dict(launchers[0].config)
    names = [p for p in inspect.signature(model.forward).parameters]
    where = {}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            where[(x.data_ptr(), tuple(x.shape))] = names[i] if i < len(names) else f"input{i}"
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        expr = f"self.{name}" if all(p.isidentifier() for p in name.split(".")) else f"self.get_parameter({name!r})"
        where.setdefault((t.data_ptr(), tuple(t.shape)), expr)
    sources: list[str] | None = []
    for a in args:
        key = (a.data_ptr(), tuple(a.shape)) if isinstance(a, torch.Tensor) else None
        if key not in where:  # copied on the way in (alignment): the converter matches by shape instead
            sources = None
            break
        sources.append(where[key])
    return {"code": codes[0], "configs": configs, "sources": sources, "torch": torch.__version__}


if __name__ == "__main__":
    try:
        result = _main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "default")
    except Exception as exc:  # noqa: BLE001 - reported to the caller as a ConversionError
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(MARKER + json.dumps(result), flush=True)
