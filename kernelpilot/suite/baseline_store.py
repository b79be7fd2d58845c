"""The run's baselines: eager and torch.compile times per problem and GPU, kept in the run's SQLite file.

A table of its own (``baselines``) in ``results.sqlite``, beside the verdicts: one row per measured
(problem, settings) key with the Baselines as JSON, stamped with the GPU's UUID, driver, torch, Triton,
CUDA and clocks. ``kernelpilot suite --resume`` reuses a row only where that identity matches the GPU it
runs on now (baseline_service.identity_mismatch decides); otherwise the problem is measured again and its
verdicts say so. Written as each baseline arrives, like the verdicts. The table is the engine's
(machine_baselines.BaselineTable, the one the machine's cache of baselines uses too), in the run's file.
"""

from __future__ import annotations

from pathlib import Path

from kernelpilot.evaluation.machine_baselines import BaselineTable
from kernelpilot.suite.store import DB_NAME


class BaselineStore(BaselineTable):
    """``get``/``put`` for baseline_service.BaselineService, safe from its worker threads."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(Path(run_dir) / DB_NAME, timeout=60, wal=True)
