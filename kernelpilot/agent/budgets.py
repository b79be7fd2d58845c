"""Session budgets, and where a session's candidate files live."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Budgets:
    """Limits for one run of a session; ``None`` or 0 means no limit. A resumed session gets its
    budgets afresh from the point it resumes (the Usage events still report session totals)."""

    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_s: float | None = None

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> Budgets:
        values = {k: getattr(config, k, None) for k in ("max_turns", "max_tokens", "max_cost_usd", "max_wall_s")}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def candidate_rel(problem: Any, workspace: Any, config: Any) -> Path:
    """The candidate directory relative to the project root (config's, else kernels/<problem stem>)."""
    cdir = getattr(config, "candidate_dir", None)
    root = getattr(config, "root", None)
    if cdir is not None:
        p = Path(cdir)
        if p.is_absolute() and root is not None:
            try:
                return p.resolve().relative_to(Path(root).resolve())
            except ValueError:
                pass
        if not p.is_absolute():
            return p
    return Path("kernels") / Path(problem.path).stem
