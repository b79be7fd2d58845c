"""A candidate written for training: its ``ModelNew`` defines ``backward`` (the drop-in protocol,
docs/model-to-faster-model.md), so its forward may do part of the backward's work.

A chunked head+loss computes the gradients of the hidden states and the weight in its forward, chunk by chunk,
and keeps them for ``backward``: three matmuls where the reference's forward has one. Timed forward against forward,
such a candidate reads slower than it is in a training step (2026-12-06, H100, a Llama-3.2-1B head: 0.48x eager,
0.23x torch.compile, while the step was faster). The worker therefore times it as a training step
(timing/training.py); where it still times forwards (a step that did not fit in the GPU's memory, or a worker of an
older kernelpilot) the verdict says so beside its times, and ``kernelpilot apply`` measures the step. Worker-free:
a source scan.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelpilot.extracted import modelnew_has_backward
from kernelpilot.verdict import Performance

FORWARD_ONLY = ("ModelNew defines backward (a training drop-in): these times are its forward against the reference's "
                "forward, and a forward that also computes the gradients reads slower here than it is in a training "
                "step; `kernelpilot apply SCRIPT` measures the step")


def defines_backward(model_file: Path) -> bool:
    """Whether ``model_file``'s ``ModelNew`` has a ``backward``; False for a file that cannot be read or parsed."""
    try:
        return modelnew_has_backward(ast.parse(model_file.read_text(errors="replace")))
    except (OSError, SyntaxError, ValueError):
        return False


def forward_only_flag(model_file: Path | None, performance: Performance | None) -> list[str]:
    """The flag for a verdict of a training drop-in timed forward alone (its training step did not fit in the GPU's
    memory, beside that timing's own flag, or a worker of an older kernelpilot); none otherwise: the worker times a
    training drop-in forward and backward (timing/training.py)."""
    if performance is None or performance.candidate is None or model_file is None or performance.timed != "forward":
        return []
    return [FORWARD_ONLY] if defines_backward(model_file) else []
