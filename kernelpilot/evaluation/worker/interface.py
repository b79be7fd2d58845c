"""What the engine needs from the worker process, as protocols: the pipeline of one candidate (pipeline.py),
its timing (timing/candidate.py) and the baselines' measurement (baselines/measure.py) are handed the worker
and use it only through these. ``main.Worker`` is the one implementation (tests/test_worker_interface.py checks
that it has every member).

Nothing here imports torch or the modules the annotations name: they are read by type checkers only.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from kernelpilot.evaluation.audit.identities import Identities
    from kernelpilot.evaluation.correctness.inputs import Inputs
    from kernelpilot.evaluation.correctness.reference import Forward
    from kernelpilot.evaluation.timing.ceilings import Ceilings
    from kernelpilot.evaluation.timing.interleaved import Pristine
    from kernelpilot.evaluation.worker.global_state import Snapshot
    from kernelpilot.evaluation.worker.problem_state import ProblemState


@runtime_checkable
class TimingWorker(Protocol):
    """What timing a candidate reads from the worker: its device, the timers and the harness functions captured
    at start-up, torch's switches before any candidate, and the GPU's measured ceilings (or why there are none)."""

    device: str
    pristine: Pristine | None  # None on the CPU (tests of the engine)
    identities: Identities
    initial_state: Snapshot
    ceilings: Ceilings | None
    ceilings_note: str


@runtime_checkable
class ProblemWorker(TimingWorker, Protocol):
    """The worker's problem cache: the problem loaded once (model, float64 copy, reference timing) and its
    torch.compile baseline compiled once, while the worker stays warm."""

    def problem_state(self, path: str, seed: int) -> ProblemState: ...

    def compiled(self, state: ProblemState, mode: str, sample: Callable[[], Inputs]) -> Forward | None: ...


@runtime_checkable
class CandidateWorker(ProblemWorker, Protocol):
    """What the pipeline of one candidate needs: the problem, the candidate's module imported under a name of
    its own, and ``ModelNew`` built with Model's weights."""

    def import_candidate(self, model_file: str) -> ModuleType: ...

    def build_model(self, module: ModuleType, state: ProblemState, seed: int) -> tuple[torch.nn.Module, str]: ...


@runtime_checkable
class BaselineWorker(ProblemWorker, Protocol):
    """What measuring a problem's baselines needs: the problem, the environment the answer is stamped with,
    how an exception is judged (its message, and whether the worker must exit), and forgetting the problem."""

    def environment(self) -> dict[str, Any]: ...

    def classify(self, exc: BaseException) -> tuple[str, bool]: ...

    def forget_problems(self) -> None: ...
