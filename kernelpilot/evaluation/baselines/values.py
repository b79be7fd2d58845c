"""A problem's baselines as every layer passes them: eager and torch.compile times on one GPU and its speed of light,
with the GPU and software they were measured on (no torch imported here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.verdict import SpeedOfLight, Timing, from_plain


@dataclass
class Baselines:
    eager: Timing | None = None
    compiled: Timing | None = None
    compile_mode: str = "default"
    speed_of_light: SpeedOfLight | None = None  # floor and bound at the measured ceilings
    eager_pct_of_ceiling: float | None = None
    ceilings: dict[str, Any] = field(default_factory=dict)  # ceilings.Ceilings as a dict
    gpu: str = ""
    notes: list[str] = field(default_factory=list)  # e.g. the torch.compile failure, no ceilings
    seconds: float = 0.0
    # what the times are valid for: a stored baseline is reused only on the same GPU, driver, torch, Triton,
    # torch's CUDA and clocks ("" where unknown: Triton and CUDA were not recorded before 2026-12)
    gpu_uuid: str = ""
    driver: str = ""
    torch: str = ""
    clocks: dict[str, int] = field(default_factory=dict)
    triton: str = ""
    cuda: str = ""
    compile_s: float = 0.0  # torch.compile's own compile time (off the GPU slot)
    compiled_missing: str = ""  # why there is no torch.compile time ("" when there is one)
    # seconds this measurement held the GPU exclusively (a suite's GPU slot waits meanwhile): the timing, or
    # all of it for a problem too large to share the GPU's memory (``exclusive``); 0.0 in records before 2026-12-03
    exclusive_s: float = 0.0
    # the problem's analysis (bytes moved, flops) the speed of light was computed from: the verdicts that use
    # these baselines take it from here instead of analysing the problem again ({} in records before 2026-12-05)
    problem_info: dict[str, Any] = field(default_factory=dict)
    # torch.compile's output through the candidates' check (compiled_check.py): the same for every candidate of
    # the problem (same seeds, trials and tolerance), so it is shared like the analysis ("" before 2026-12-06)
    compiled_check: str = ""
    # the measurement's seconds step by step (problem: its model built and one eager call; compile; check:
    # torch.compile's own check; pool: the timing's inputs; timing; ceiling: the speed of light); {} before 2026-12-07
    steps: dict[str, float] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        return {"gpu_uuid": self.gpu_uuid, "driver": self.driver, "torch": self.torch, "clocks": dict(self.clocks),
                "triton": self.triton, "cuda": self.cuda}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Baselines":
        return from_plain(cls, data)



def software_versions() -> tuple[str, str]:
    """(Triton's version, the CUDA version torch was built with), read from the installed packages without
    importing torch or Triton ("" for one that is not installed), so that a process that has not imported
    torch (the UI looking up the machine's cached baselines) names them exactly as the worker does."""
    import ast
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    triton = ""
    for dist in ("triton", "pytorch-triton", "pytorch-triton-rocm"):
        try:
            triton = version(dist)
            break
        except PackageNotFoundError:
            continue
    cuda = ""
    try:
        spec = importlib.util.find_spec("torch")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if locations:
            tree = ast.parse((Path(locations[0]) / "version.py").read_text(encoding="utf-8"))
            for node in tree.body:  # torch/version.py: ``cuda: Optional[str] = '13.0'``
                target = node.target if isinstance(node, ast.AnnAssign) else (
                    node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
                if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(node.value, ast.Constant):
                    cuda = str(node.value.value or "")
    except (OSError, SyntaxError, ValueError, ImportError):
        pass
    return triton, cuda
