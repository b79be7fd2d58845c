"""torch.compile's own kernels as a candidate: record Inductor's output code (generate.py, on the GPU)
and convert it into a self-contained Triton candidate (convert.py).

``candidate_from_code(problem, code, configs, sources)`` converts recorded output code for a problem;
``write_candidate(directory, conversion)`` writes its files. Nothing here is imported by the core or
the evaluation engine; the agent tool, the TUI's /inductor and ``kernelpilot init --from-inductor`` use it.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from kernelpilot.inductor.convert import Conversion, Source, convert
from kernelpilot.inductor.helpers import ConversionError

__all__ = ["Conversion", "ConversionError", "candidate_from_code", "write_candidate"]


def candidate_from_code(problem: str | Path, code: str, configs: dict[str, Any] | None = None,
                        sources: dict[str, str] | list[str] | None = None) -> Conversion:
    """Convert Inductor output ``code`` for ``problem``; ``configs`` (kernel name -> chosen config) and
    ``sources`` (graph input -> ``x`` / ``self.linear.weight``) come from a recording run on the GPU."""
    import torch

    from kernelpilot.problem import load_problem, make_inputs

    prob = load_problem(problem)
    module = prob.load_module()
    with torch.device("meta"):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        inputs = list(make_inputs(module))
    names = [p for p in inspect.signature(model.forward).parameters if p not in ("self",)]
    if len(names) < len(inputs) or any(inspect.signature(model.forward).parameters[n].kind in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) for n in names):
        names = [f"input{i}" for i in range(len(inputs))]
    state = dict(model.state_dict(keep_vars=True))
    param_names = {n for n, _ in model.named_parameters()}
    params = [(n, tuple(t.shape), str(t.dtype)) for n, t in state.items() if n in param_names]
    buffers = [(n, tuple(t.shape), str(t.dtype)) for n, t in state.items() if n not in param_names]
    given = [Source(n, tuple(x.shape), tuple(x.stride())) if isinstance(x, torch.Tensor) else Source(n, (), ())
             for n, x in zip(names, inputs)]
    if isinstance(sources, list):  # by position, as a recording run observed them
        from kernelpilot.inductor.convert import graph_inputs

        sources = dict(zip(graph_inputs(code), sources))
    mapped = {arg: Source(expr, (), ()) for arg, expr in sources.items()} if sources else None
    name = Path(prob.path).parent.name if Path(prob.path).stem == "problem" else prob.name
    return convert(code, mapped, params=params, buffers=buffers, inputs=given, problem_name=name,
                   configs=configs, torch_version=torch.__version__)


def write_candidate(directory: str | Path, conversion: Conversion) -> list[Path]:
    """Write the candidate's files into ``directory`` (created); returns the paths written."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in conversion.files.items():
        path = target / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
