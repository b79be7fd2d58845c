"""The run's baselines: eager and torch.compile times per problem and GPU, kept in the run's SQLite file.

A table of its own (``baselines``) in ``results.sqlite``, beside the verdicts: one row per measured
(problem, settings) key with the Baselines as JSON, stamped with the GPU's UUID, driver, torch, Triton,
CUDA and clocks. ``kernelpilot suite --resume`` reuses a row only where that identity matches the GPU it
runs on now (baseline_service.identity_mismatch decides); otherwise the problem is measured again and its
verdicts say so. Written as each baseline arrives, like the verdicts. The table is the engine's
(machine_baselines.BaselineTable, the one the machine's cache of baselines uses too), in the run's file.

``--baselines-from OTHER_RUN`` (``others``): runs of the same problems on this machine, earlier the same
session (re-scoring one folder under several rule sets, say), whose rows may serve this run: a row found
there is copied into this run's file and used under the same rule as a resumed run's (same key: problem
bytes and timing settings; same GPU identity, or measured again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.evaluation.baselines.machine_cache import BaselineTable
from kernelpilot.suite.store import DB_NAME


class BaselineStore(BaselineTable):
    """``get``/``put`` for baseline_service.BaselineService, safe from its worker threads."""

    def __init__(self, run_dir: Path, others: list[Path] = ()) -> None:  # type: ignore[assignment]
        super().__init__(Path(run_dir) / DB_NAME, timeout=60, wal=True)
        self.others: list[BaselineTable] = []  # opened once, read at each miss of this run's own table
        for other in others:
            path = Path(other) / DB_NAME
            if not path.is_file():
                self.close()
                raise KernelpilotError(f"--baselines-from {other}: no run there ({DB_NAME} is missing); pass the "
                                        "folder of an earlier `kernelpilot suite` run")
            if path.resolve() != self.path.resolve():
                self.others.append(BaselineTable(path, timeout=60, wal=True))
        self.borrowed = 0

    def get(self, key: str) -> dict[str, Any] | None:
        own = super().get(key)
        if own is not None:
            return own
        for other in self.others:
            found = other.get(key)
            row = other.row(key) if found is not None else None
            if found is not None and row is not None:
                self.put(key, row[0], found, at=row[1])
                self.borrowed += 1
                return found
        return None

    def close(self) -> None:
        for other in self.others:
            other.close()
        self.others = []
        super().close()
