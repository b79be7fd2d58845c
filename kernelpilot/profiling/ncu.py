"""Nsight Compute: the command we run, and the parser for its CSV report.

We ask ncu for a focused metric set (``METRICS``), only for kernels launched inside one NVTX range
(``kp_candidate`` or ``kp_baseline``, pushed by :mod:`kernelpilot.profiling.target`), for a bounded
number of launches, with ``--clock-control none`` (we never touch the card's clocks). The CSV is the
``raw`` page: one row per kernel launch, a header row, then a units row.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field

from kernelpilot.profiling.runner import cuda_tool

# Stall reasons, in the order ncu's documentation lists them. Ratio = warps stalled for this reason
# per issued instruction; the largest few say why a kernel waits.
STALL_REASONS: tuple[str, ...] = (
    "long_scoreboard",
    "short_scoreboard",
    "wait",
    "barrier",
    "membar",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "not_selected",
    "selected",
    "dispatch_stall",
    "drain",
    "no_instruction",
    "branch_resolving",
    "imc_miss",
    "sleeping",
    "tex_throttle",
    "gmma",
)

_STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_size",
    "launch__grid_size",
    "lts__t_sector_hit_rate.pct",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",
    *(_STALL_METRIC.format(r) for r in STALL_REASONS),
)

CANDIDATE_RANGE = "kp_candidate"
BASELINE_RANGE = "kp_baseline"


@dataclass
class KernelProfile:
    """The metrics of one kernel, averaged over the launches ncu profiled."""

    name: str
    nvtx_range: str = ""  # CANDIDATE_RANGE or BASELINE_RANGE
    launches: int = 1
    duration_us: float | None = None
    dram_pct_of_peak: float | None = None
    dram_bytes: float | None = None  # read + write per launch
    sm_pct_of_peak: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers_per_thread: int | None = None
    shared_bytes_per_block: int | None = None
    block_size: int | None = None
    grid_size: int | None = None
    l2_hit_pct: float | None = None
    load_bytes_per_sector: float | None = None  # of 32
    store_bytes_per_sector: float | None = None  # of 32
    stalls: dict[str, float] = field(default_factory=dict)  # reason -> warps per issue

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        ranked = sorted(self.stalls.items(), key=lambda kv: kv[1], reverse=True)
        return [(k, v) for k, v in ranked[:n] if v > 0]

    def to_dict(self) -> dict:
        return asdict(self)


def ncu_path() -> str | None:
    """The ncu binary, from PATH or the CUDA toolkit."""
    return cuda_tool("ncu")


def build_command(
    target: list[str], *, nvtx_ranges: tuple[str, ...] = (CANDIDATE_RANGE, BASELINE_RANGE),
    launch_count: int = 6, ncu: str = "ncu",
) -> list[str]:
    """The ncu command line profiling only kernels launched inside ``nvtx_ranges``."""
    return [
        ncu,
        "--clock-control",
        "none",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(METRICS),
        "--nvtx",
        *(arg for r in nvtx_ranges for arg in ("--nvtx-include", f"{r}/")),
        "--launch-count",
        str(launch_count),
        *target,
    ]


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text in {"n/a", "N/A"}:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _scaled(value: float | None, unit: str, want: str) -> float | None:
    """Convert ncu's unit to the one we report (ns/us/ms; byte/Kbyte/Mbyte/Gbyte)."""
    if value is None:
        return None
    factors = {
        ("ns", "us"): 1e-3,
        ("us", "us"): 1.0,
        ("usecond", "us"): 1.0,
        ("nsecond", "us"): 1e-3,
        ("ms", "us"): 1e3,
        ("msecond", "us"): 1e3,
        ("byte", "byte"): 1.0,
        ("Kbyte", "byte"): 1e3,
        ("Mbyte", "byte"): 1e6,
        ("Gbyte", "byte"): 1e9,
    }
    return value * factors.get((unit.strip(), want), 1.0)


def parse_csv(text: str) -> list[KernelProfile]:
    """Parse ncu's ``--csv --page raw`` output into one KernelProfile per kernel name.

    Launches of the same kernel are averaged. Lines ncu prints before the table (``==PROF==``,
    warnings, the program's own output) are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 3:
        return []
    header, units = rows[0], rows[1]
    unit_of = dict(zip(header, units))
    range_column = next((h for h in header if "Push/Pop_Range" in h), None)
    grouped: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        rec = dict(zip(header, row))
        where = rec.get(range_column, "") if range_column else ""
        nvtx = next((r for r in (CANDIDATE_RANGE, BASELINE_RANGE) if f":{r}:" in where), "")
        grouped.setdefault((nvtx, rec.get("Kernel Name", "?")), []).append(rec)
    return [_profile(name, nvtx, recs, unit_of) for (nvtx, name), recs in grouped.items()]


def _profile(name: str, nvtx: str, recs: list[dict[str, str]], unit_of: dict[str, str]) -> KernelProfile:
    def avg(metric: str, want: str | None = None) -> float | None:
        vals = [_number(r.get(metric, "")) for r in recs]
        nums = [v for v in vals if v is not None]
        if not nums:
            return None
        mean = sum(nums) / len(nums)
        return _scaled(mean, unit_of.get(metric, ""), want) if want else mean

    def as_int(v: float | None) -> int | None:
        return None if v is None else int(round(v))

    read, write = avg("dram__bytes_read.sum", "byte"), avg("dram__bytes_write.sum", "byte")
    shared = [avg("launch__shared_mem_per_block_static", "byte"), avg("launch__shared_mem_per_block_dynamic", "byte")]
    ld, st = avg(METRICS[13]), avg(METRICS[14])
    return KernelProfile(
        name=name,
        nvtx_range=nvtx,
        launches=len(recs),
        duration_us=avg("gpu__time_duration.sum", "us"),
        dram_pct_of_peak=avg("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        dram_bytes=None if read is None or write is None else read + write,
        sm_pct_of_peak=avg("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        achieved_occupancy_pct=avg("sm__warps_active.avg.pct_of_peak_sustained_active"),
        theoretical_occupancy_pct=avg("sm__maximum_warps_per_active_cycle_pct"),
        registers_per_thread=as_int(avg("launch__registers_per_thread")),
        shared_bytes_per_block=None if shared[0] is None else as_int(shared[0] + (shared[1] or 0)),
        block_size=as_int(avg("launch__block_size")),
        grid_size=as_int(avg("launch__grid_size")),
        l2_hit_pct=avg("lts__t_sector_hit_rate.pct"),
        # ncu reports "% of 32 bytes used per sector": convert to bytes of 32.
        load_bytes_per_sector=None if ld is None else 32.0 * ld / 100.0,
        store_bytes_per_sector=None if st is None else 32.0 * st / 100.0,
        stalls={r: v for r in STALL_REASONS if (v := avg(_STALL_METRIC.format(r))) is not None},
    )
