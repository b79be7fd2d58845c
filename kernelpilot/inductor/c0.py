"""c0: torch.compile's own run of a problem as a candidate, from a recording (generate.py's output).

What torch.compile runs for a problem is dynamo's transformation of its forward: zero or more graphs,
each compiled by Inductor into Triton kernels and library calls, with eager PyTorch wherever dynamo
stopped tracing. c0 runs the same, in the same order:

- **one graph that is the whole forward** (most problems): ModelNew.forward is that graph's ``call()``
  rewritten (convert.convert). The recording says which parameter or input each graph input is.
- **anything else** (a graph break: level2/28, whose InstanceNorm warns and so splits the forward into
  a graph, an eager ``instance_norm`` and a second graph; a graph followed by eager code: level3/35,
  whose ``nn.LSTM`` dynamo leaves to eager after the graph that draws ``h0``/``c0``; a graph whose outputs
  dynamo also stores into module attributes: level3/33's ``self.hidden``): dynamo is run here on the
  meta model (trace.py) to learn the order of graphs and eager calls and where every value comes from;
  forward calls one method per graph and runs the eager calls between them as the recorded torch calls,
  their libraries declared (convert.convert_traced).
- **no graph at all** (level3/36-42: a forward that starts with an ``nn.LSTM``/``nn.GRU``, which dynamo
  leaves to eager, so the whole frame runs eagerly: torch.compile's run IS eager cuDNN): ModelNew is the
  problem's Model itself (problem_source.py), its library calls declared (cuDNN's RNN, cuBLAS), and it
  has no kernel of its own until one is written.

The kernels' ``triton_helpers`` come from the torch that recorded (the recording's ``runtime`` sources,
or ``helpers_source`` for a recording made before generate.py stored them).

``candidate_from_code`` converts bare output code of one graph (no recording); ``write_candidate`` writes a
conversion's files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernelpilot.inductor import render
from kernelpilot.inductor.convert import Conversion, Source, convert, convert_traced, graph_inputs, parse_graph
from kernelpilot.inductor.facts import ModelFacts, model_facts
from kernelpilot.inductor.helpers import ConversionError
from kernelpilot.inductor.problem_source import problem_definitions
from kernelpilot.inductor.trace import eager_libraries, trace_forward


def problem_name(facts: ModelFacts) -> str:
    return facts.problem.parent.name if facts.problem.stem == "problem" else facts.problem.stem


def recording_graphs(recording: dict[str, Any]) -> list[dict[str, Any]]:
    """The recording's graphs (code, configs, sources), in the order torch.compile ran them."""
    graphs = recording.get("graphs")
    if graphs:
        return list(graphs)
    if recording.get("code"):
        return [{"code": recording["code"], "configs": recording.get("configs"), "sources": recording.get("sources")}]
    return []


def candidate_from_recording(problem: str | Path, recording: dict[str, Any], helpers_source: str | None = None,
                             facts: ModelFacts | None = None) -> Conversion:
    """c0 for ``problem`` from one recording (see the module docstring)."""
    facts = facts or model_facts(problem)
    name = problem_name(facts)
    version = str(recording.get("torch") or "")
    helpers = helpers_source or (recording.get("runtime") or {}).get("triton_helpers")
    graphs = recording_graphs(recording)
    if not graphs:
        error = str(recording.get("error") or "")
        if error and "no Inductor graph" not in error:
            raise ConversionError(f"the recording has no graph: {error.splitlines()[0][:300]}")
        return eager_candidate(facts, name)
    if len(graphs) == 1 and graphs[0].get("sources") is not None:
        graph = graphs[0]
        code = graph["code"]
        sources = graph["sources"]
        if isinstance(sources, list):
            sources = dict(zip(graph_inputs(code), sources))
        returns = _returns(code)
        if facts.outputs is None or facts.outputs == returns:
            mapped = {arg: Source(expr, (), ()) for arg, expr in sources.items()}
            return convert(code, mapped, params=facts.params, buffers=facts.buffers, inputs=facts.given,
                           problem_name=name, configs=graph.get("configs"), torch_version=version,
                           helpers_source=helpers)
    trace = trace_forward(facts)
    if trace.graphs != len(graphs):
        raise ConversionError(f"the recording has {len(graphs)} graphs, dynamo here makes {trace.graphs} of the "
                              "problem: this torch traces it differently from the one that recorded it; record and "
                              "convert with the same torch.")
    attributes = {a[0] for a in facts.attributes}
    read = " ".join(a for s in trace.steps if not isinstance(s, str) for a in s.args) + " " + " ".join(trace.stores)
    uses_attributes = any(re.search(rf"{re.escape(a)}\b", read) for a in attributes)
    # cuDNN's RNN is fast only on weights flattened into one buffer, which nn.LSTM/GRU/RNN does when moved
    rnn = any(isinstance(s, str) and re.match(r"v\d+ = torch\.(lstm|gru|rnn_tanh|rnn_relu)\(", s) for s in trace.steps)
    init = problem_definitions(facts.problem, "{methods}") if uses_attributes or rnn else None
    notes = _notes(recording, trace, uses_attributes, rnn)
    return convert_traced([(g["code"], g.get("configs")) for g in graphs], trace, params=facts.params,
                          buffers=facts.buffers, arg_names=facts.arg_names, problem_name=name, torch_version=version,
                          helpers_source=helpers, init=init, notes=notes)


def _returns(code: str) -> int:
    return len(parse_graph(code, {}).body.returns) if "def call(" in code else 0


def _notes(recording: dict[str, Any], trace: Any, attributes: bool, rnn: bool) -> list[str]:
    graphs = trace.graphs
    notes = [f"torch.compile ran {graphs} graph{'s' if graphs != 1 else ''} for this forward"
             + (f" and {trace.eager_calls} eager PyTorch call{'s' if trace.eager_calls != 1 else ''} between or "
                "after them (dynamo left them to eager" + (": " + _first_break(recording) if _first_break(recording)
                                                           else "") + ")" if trace.eager_calls else "")
             + "; forward runs them in that order, each graph as a method."]
    if trace.stores:
        notes.append("dynamo also stores graph outputs into module attributes (" + "; ".join(trace.stores)
                     + "), and so does forward.")
    if attributes:
        notes.append("ModelNew's constructor is the problem Model's own: the graphs read a plain tensor attribute "
                     "(not a parameter or buffer), which only Model's constructor gives its value.")
    elif rnn:
        notes.append("ModelNew's constructor is the problem Model's own: its RNN modules keep their weights in the "
                     "one flat buffer cuDNN's RNN reads, as the eager call torch.compile makes does.")
    return [line for note in notes for line in _wrap(note)]


def _first_break(recording: dict[str, Any]) -> str:
    breaks = recording.get("breaks") or []
    if not breaks:
        return ""
    first = str(breaks[0]).splitlines()
    explanation = next((line.strip() for line in first if line.strip().startswith("Explanation:")), first[0])
    return explanation.replace("Explanation: ", "")[:160]


def _wrap(text: str, width: int = 100) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


def eager_candidate(facts: ModelFacts, name: str) -> Conversion:
    """c0 where dynamo compiled no graph: the problem's own Model, its library calls declared."""
    declared = eager_libraries(facts)
    notes = _wrap("torch.compile compiled no graph for this problem: dynamo leaves its forward to eager PyTorch "
                  "(an nn.LSTM, nn.GRU or nn.RNN at the start of forward makes it skip the whole frame), so what "
                  "torch.compile runs is the problem's own forward, and so is this candidate's: the library calls "
                  "are declared; it has no kernel of its own yet. Write one (a Triton kernel in this file or beside "
                  "it) to start from here.")
    head = render.header(name, "", declared, False, notes,
                         ["ModelNew is the problem's Model, unchanged: what torch.compile runs for it."])
    text = head + "\n\n\n" + problem_definitions(facts.problem)
    return Conversion({"model_new.py": text}, [], declared, "recorded", "eager", notes)


def candidate_from_code(problem: str | Path, code: str, configs: dict[str, Any] | None = None,
                        sources: dict[str, str] | list[str] | None = None, helpers_source: str | None = None,
                        torch_version: str = "") -> Conversion:
    """Convert Inductor output ``code`` (one graph) for ``problem``; ``configs`` (kernel name -> chosen
    config) and ``sources`` (graph input -> ``x`` / ``self.linear.weight``, or a list by position) come
    from a recording run on the GPU. ``helpers_source``: the triton_helpers.py of the torch
    (``torch_version``) that generated ``code``; without either, this torch's helpers are used."""
    if not code:
        raise ConversionError("no output code to convert: a recording with no graph or several graphs has its "
                              "graphs in recording.data; convert it with candidate_from_recording(problem, "
                              "recording.data).")
    recording = {"code": code, "configs": configs, "sources": sources, "torch": torch_version}
    if sources is None:  # matched by shape and stride, as before a recording observed them
        facts = model_facts(problem)
        return convert(code, None, params=facts.params, buffers=facts.buffers, inputs=facts.given,
                       problem_name=problem_name(facts), configs=configs, torch_version=torch_version,
                       helpers_source=helpers_source)
    return candidate_from_recording(problem, recording, helpers_source)


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
