"""The worker's start, timed step by step (worker/main.py): torch imported, CUDA started, the imports the harness
needs settled (``start_torch``). The ready message carries each step's seconds and when ``main()`` began, so the
client can tell the interpreter's start from torch's import, CUDA's start, the integrity baseline, the timer's
capture, the ceilings and the confinement (protocol.py ``start_steps``)."""

from __future__ import annotations

import time

MAIN_AT = [0.0]  # when the worker's main() began (time.monotonic(), the clock the client reads too)


class StartSteps:
    """Seconds of each step of the worker's start, in order (``mark`` ends a step)."""

    def __init__(self) -> None:
        self.at = time.monotonic()
        self.steps: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.steps[name] = round(now - self.at, 3)
        self.at = now


def start_torch(device: str, steps: StartSteps) -> None:
    """Import torch, start CUDA on ``device`` (a CUDA one), then import everything the harness uses: some imports
    rebind torch functions (torch._dynamo wraps torch.manual_seed), and the integrity baseline taken next must see
    the settled objects."""
    import torch

    steps.mark("import_torch")
    if device.startswith("cuda"):
        torch.cuda.init()
        torch.empty(1, device=device).fill_(0)
        torch.cuda.synchronize()
        steps.mark("cuda_init")
    import torch._dynamo  # noqa: F401
    import torch.profiler  # noqa: F401
    import torch.utils._python_dispatch  # noqa: F401
    import torch.utils.flop_counter  # noqa: F401

    steps.mark("import_dynamo_profiler")
