"""Roofline for a candidate and its torch.compile baseline, side by side.

Inputs are the problem's minimal bytes and FLOPs, the measured ceilings (copy bandwidth, bf16
matmul rate) and the two median times from the verdict. The same points render as text for the
model and as bars for the TUI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class RooflinePoint:
    label: str
    time_ms: float
    tbps: float | None  # achieved bytes/s in TB/s (minimal bytes over time)
    tflops: float | None
    pct_of_ceiling: float | None  # of the bound that applies


@dataclass
class Roofline:
    bytes_moved: int | None
    flops: int | None
    ceiling_tbps: float
    ceiling_tflops: float
    points: list[RooflinePoint]

    @property
    def intensity(self) -> float | None:
        """FLOP per byte; the ridge point is ceiling_tflops / ceiling_tbps."""
        if not self.bytes_moved or self.flops is None:
            return None
        return self.flops / self.bytes_moved

    @property
    def ridge(self) -> float:
        return self.ceiling_tflops / self.ceiling_tbps

    @property
    def bound(self) -> str:
        i = self.intensity
        if i is None:
            return "memory" if self.bytes_moved else "unknown"
        return "memory" if i < self.ridge else "compute"

    @property
    def floor_ms(self) -> float | None:
        times = []
        if self.bytes_moved:
            times.append(self.bytes_moved / (self.ceiling_tbps * 1e12) * 1e3)
        if self.flops:
            times.append(self.flops / (self.ceiling_tflops * 1e12) * 1e3)
        return max(times) if times else None

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        lines = [
            f"roofline: {self.bound}-bound; floor {self.floor_ms:.4g} ms at "
            f"{self.ceiling_tbps:.2f} TB/s, {self.ceiling_tflops:.0f} TFLOP/s"
            if self.floor_ms is not None
            else "roofline: problem size unknown"
        ]
        if self.intensity is not None:
            lines.append(f"  intensity {self.intensity:.3g} FLOP/B (ridge {self.ridge:.0f} FLOP/B)")
        for p in self.points:
            rate = f"{p.tbps:.2f} TB/s" if p.tbps is not None else ""
            if p.tflops is not None and self.bound == "compute":
                rate = f"{p.tflops:.1f} TFLOP/s"
            pct = f"{p.pct_of_ceiling:.0f}% of ceiling" if p.pct_of_ceiling is not None else ""
            lines.append(f"  {p.label:<14} {p.time_ms:9.4f} ms  {rate:>12}  {pct}")
        return "\n".join(lines)

    def bars(self, width: int = 40) -> list[str]:
        """One text bar per point, full width = the ceiling (for the TUI)."""
        out = []
        for p in self.points:
            pct = max(0.0, min(p.pct_of_ceiling or 0.0, 100.0))
            filled = int(round(width * pct / 100.0))
            out.append(f"{p.label:<14} {'█' * filled}{'·' * (width - filled)} {pct:5.1f}%")
        return out


def build_roofline(
    *,
    bytes_moved: int | None,
    flops: int | None,
    ceiling_tbps: float,
    ceiling_tflops: float,
    times_ms: dict[str, float | None],
) -> Roofline:
    """Points for each labelled time (e.g. {"candidate": 0.41, "torch.compile": 0.93})."""
    roof = Roofline(bytes_moved, flops, ceiling_tbps, ceiling_tflops, [])
    for label, t in times_ms.items():
        if not t or t <= 0:
            continue
        tbps = bytes_moved / (t * 1e-3) / 1e12 if bytes_moved else None
        tflops = flops / (t * 1e-3) / 1e12 if flops else None
        if roof.bound == "compute" and tflops is not None:
            pct = 100.0 * tflops / ceiling_tflops
        elif tbps is not None:
            pct = 100.0 * tbps / ceiling_tbps
        else:
            pct = None
        roof.points.append(RooflinePoint(label, t, tbps, tflops, pct))
    return roof


def roofline_from_verdict(verdict: dict[str, Any]) -> Roofline | None:
    """The roofline of a benchmark verdict (its speed of light and medians); None without ceilings."""
    sol = verdict.get("speed_of_light") or {}
    perf = verdict.get("performance") or {}
    if not sol.get("ceiling_tbps") or not sol.get("ceiling_tflops"):
        return None
    times = {label: (perf.get(key) or {}).get("median_ms")
             for label, key in (("candidate", "candidate"), ("torch.compile", "compiled"), ("eager", "eager"))}
    return build_roofline(bytes_moved=sol.get("bytes_moved"), flops=sol.get("flops"),
                          ceiling_tbps=float(sol["ceiling_tbps"]), ceiling_tflops=float(sol["ceiling_tflops"]),
                          times_ms=times)
