"""torch.compile's own kernels as a candidate ("c0"): record Inductor's output on the GPU (generate.py,
batch.py for many problems at once) and convert it into a self-contained Triton candidate (c0.py,
convert.py, on any machine).

The entry points are c0.py's: ``candidate_from_recording(problem, recording)`` converts one recording
(generate.py's JSON); ``candidate_from_code(problem, code, configs, sources)`` converts bare output code
of one graph; ``write_candidate(directory, conversion)`` writes its files. A conversion that cannot be
made raises helpers.ConversionError. Nothing here is imported by the core or the evaluation engine; the
agent tool, the TUI's /inductor and ``kernelpilot init --from-inductor`` use it.

This file imports nothing, so the modules of the package import one another directly.
"""
