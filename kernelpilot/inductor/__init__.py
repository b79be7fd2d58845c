"""torch.compile's own kernels as a candidate ("c0"): record Inductor's output on the GPU (generate.py,
batch.py for many problems at once) and convert it into a self-contained Triton candidate (c0.py,
convert.py, on any machine).

``candidate_from_recording(problem, recording)`` converts one recording (generate.py's JSON);
``candidate_from_code(problem, code, configs, sources)`` converts bare output code of one graph;
``write_candidate(directory, conversion)`` writes its files. Nothing here is imported by the core or
the evaluation engine; the agent tool, the TUI's /inductor and ``kernelpilot init --from-inductor`` use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.inductor.c0 import candidate_from_recording
from kernelpilot.inductor.convert import Conversion
from kernelpilot.inductor.helpers import ConversionError

__all__ = ["Conversion", "ConversionError", "candidate_from_code", "candidate_from_recording", "write_candidate"]


def candidate_from_code(problem: str | Path, code: str, configs: dict[str, Any] | None = None,
                        sources: dict[str, str] | list[str] | None = None, helpers_source: str | None = None,
                        torch_version: str = "") -> Conversion:
    """Convert Inductor output ``code`` (one graph) for ``problem``; ``configs`` (kernel name -> chosen
    config) and ``sources`` (graph input -> ``x`` / ``self.linear.weight``, or a list by position) come
    from a recording run on the GPU. ``helpers_source``: the triton_helpers.py of the torch
    (``torch_version``) that generated ``code``; without either, this torch's helpers are used."""
    if not code:
        raise ConversionError("no output code to convert: a recording with no graph or several graphs has its "
                              "graphs in recording.data; convert it with candidate_from_recording(problem, recording.data).")
    recording = {"code": code, "configs": configs, "sources": sources, "torch": torch_version}
    if sources is None:  # matched by shape and stride, as before a recording observed them
        from kernelpilot.inductor.c0 import problem_name
        from kernelpilot.inductor.convert import convert
        from kernelpilot.inductor.facts import model_facts

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
