"""model_new.py for a converted Inductor output: the header, Inductor's kernels verbatim, and ModelNew.

Two shapes of ModelNew:

- one graph that is the whole forward (the usual case): forward is that graph's ``call()`` rewritten
  inline, its inputs bound first (``arg0_1, arg1_1 = x, self.weight``);
- anything else dynamo made of the forward (graph breaks, eager code between or after graphs, values
  dynamo stores into attributes): one method per graph (``_graph0(self, device, arg0_1, ...)``, the
  graph's rewritten ``call()``, returning its outputs as a tuple) and a forward that calls them and runs
  the eager code in between, in the order torch.compile ran it (trace.py).

``__init__`` registers the problem Model's parameters and buffers under their names (the harness loads
their values), or, when the candidate needs Model's plain tensor attributes too, is Model's own
constructor (problem_source.py).
"""

from __future__ import annotations

from typing import Any

from kernelpilot.inductor.kernels import Kernel

Spec = tuple[str, tuple[int, ...], str]


KERNELS_SUMMARY = ["The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's "
                   "launcher",
                   "did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate."]


def header(problem_name: str, text: str, libraries: list[str], helpers: bool, notes: list[str],
           summary: list[str] | None = None) -> str:
    """The module docstring, imports and KERNELPILOT_* declarations; ``text`` is the kernels' source;
    ``summary`` replaces the kernels' paragraph (a candidate without Inductor kernels)."""
    what = "kernels" if summary is None else "run"
    kind = "a Triton candidate" if summary is None else "a candidate"
    head = [f'"""torch.compile\'s {what} for {problem_name}, as {kind} (kernelpilot init --from-inductor).',
            ""] + (KERNELS_SUMMARY if summary is None else summary)
    if notes:
        head += [""] + notes
    head += ['"""', "", "import torch"] \
        + (["import triton", "import triton.language as tl"] if summary is None else []) + ["from torch import nn"]
    if "tl_math." in text:
        head.append("from triton.language import math as tl_math")
    if "libdevice." in text:
        head.append("from triton.language.extra import libdevice")
    if helpers:
        head += ["", "import triton_helpers"]
    head += ["", "", 'KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile\'s']
    if libraries:
        head.append(f"KERNELPILOT_LIBRARIES = {tuple(libraries)!r}  # torch.compile's library calls, kept: allowed "
                    "for this candidate, listed in the verdict")
    return "\n".join(head)


def _autotune(options: list[dict[str, Any]]) -> str:
    configs = ",\n        ".join(f"triton.Config({o['kwargs']!r}, num_warps={o['num_warps']}, "
                                 f"num_stages={o['num_stages']})"
                                 for o in options)
    return f"@triton.autotune(\n    configs=[\n        {configs},\n    ],\n    key=[],\n)"


def kernel_blocks(kernels: dict[str, Kernel], autotuned: dict[str, list[dict[str, Any]]],
                  helpers: dict[str, str]) -> list[str]:
    """The helper functions Inductor defined beside the kernels, then each kernel with its comments."""
    parts = list(helpers.values())
    for var, k in kernels.items():
        block = "\n".join(k.comments)
        if var in autotuned:
            block += "\n" + _autotune(autotuned[var])
        parts.append((block + "\n" + k.text).strip("\n"))
    return parts


def shell_init(params: list[Spec], buffers: list[Spec]) -> list[str]:
    lines = ["    def __init__(self, *init_inputs) -> None:", "        super().__init__()"]
    if params or buffers:
        lines.append("        # the problem Model's parameters and buffers (names, shapes, dtypes); the harness loads "
                     "their values")
    made: set[str] = set()
    for name, shape, dtype in params + buffers:
        parts = name.split(".")
        for i in range(1, len(parts)):
            path = ".".join(parts[:i])
            if path not in made:
                made.add(path)
                parent = "self" if i == 1 else f"self.get_submodule({'.'.join(parts[:i - 1])!r})"
                lines.append(f"        {parent}.add_module({parts[i - 1]!r}, nn.Module())")
        owner = "self" if len(parts) == 1 else f"self.get_submodule({'.'.join(parts[:-1])!r})"
        empty = f"torch.empty({tuple(shape)!r}, dtype={dtype})"
        if (name, shape, dtype) in params:
            lines.append(f"        {owner}.register_parameter({parts[-1]!r}, nn.Parameter({empty}, "
                         "requires_grad=False))")
        else:
            lines.append(f"        {owner}.register_buffer({parts[-1]!r}, {empty})")
    return lines


def device_line(arg_names: list[str]) -> str:
    return f"        device = {arg_names[0]}.device" if arg_names else "        device = torch.device('cuda')"


def inline_forward(arg_names: list[str], args: list[str], exprs: list[str], body: list[str], output: str,
                   stores: list[str]) -> list[str]:
    """forward as one graph's call(): inputs bound, the body, attribute stores, the output."""
    lines = ["", f"    def forward(self, {', '.join(arg_names)}):"]
    if args:
        lines.append(f"        {', '.join(args)} = {', '.join(exprs)}")
    lines.append(device_line(arg_names))
    lines += [f"        {line}" for line in body]
    lines += [f"        {line}" for line in stores]
    lines.append(f"        return {output}")
    return lines


def graph_method(index: int, args: list[str], body: list[str], returns: list[str]) -> list[str]:
    lines = ["", f"    def _graph{index}(self, device, {', '.join(args)}):".replace(", )", ")"),
             f'        """torch.compile\'s graph {index}: Inductor\'s call(), rewritten."""']
    lines += [f"        {line}" for line in body]
    lines.append(f"        return ({''.join(r + ', ' for r in returns).rstrip(' ')})")
    return lines


def traced_forward(arg_names: list[str], steps: list[Any], output: str, stores: list[str]) -> list[str]:
    """forward as dynamo runs it: graph calls and the eager code between them (trace.Trace.steps)."""
    lines = ["", f"    def forward(self, {', '.join(arg_names)}):", device_line(arg_names)]
    for step in steps:
        if isinstance(step, str):
            lines.append(f"        {step}")
        else:
            lines.append(f"        {step.var} = self._graph{step.graph}(device{''.join(', ' + a for a in step.args)})")
    lines += [f"        {line}" for line in stores]
    lines.append(f"        return {output}")
    return lines
