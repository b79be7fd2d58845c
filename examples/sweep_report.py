"""The example sweep's rows and its report (bench_sweep.py): the table of our kernel against eager,
torch.compile and the library peers, and the geomeans under it.

    python examples/sweep_report.py OUT1/rows.jsonl [OUT2/rows.jsonl ...]   # the report of saved rows
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Row:
    op: str
    shape: str
    eager_ms: float | None = None
    compile_ms: float | None = None
    cand_ms: float | None = None
    cand_spread: str = ""
    throughput: str = ""  # "3.91 TB/s" or "712 TFLOP/s"
    pct_ceiling: float | None = None
    vs_compile: float | None = None
    vs_eager: float | None = None
    correct: bool | None = None
    norm_err: float | None = None
    max_abs_err: float | None = None
    note: str = ""
    dtype: str = "bf16"
    peer_ms: dict[str, float | None] = field(default_factory=dict)  # library -> median ms (None: did not run)
    peer_notes: dict[str, str] = field(default_factory=dict)  # library -> why it did not run, or an adaptation
    vs_peer: float | None = None  # fastest correct peer's time over ours


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[Row], peers: list[str]) -> str:
    """Our kernel against eager, torch.compile and each peer; a peer's cell is its time or why it did not run."""
    head = ("| op | dtype | shape | eager ms | compile ms | " + "".join(f"{n} ms | " for n in peers)
            + "candidate ms (min-max) | achieved | % of ceiling | x vs compile | x vs fastest peer | x vs eager "
            "| correct | norm err | note |")
    lines = [head, "|" + "---|" * (14 + len(peers))]
    for r in rows:
        cells = "".join(f"{fmt(r.peer_ms.get(n), '.3f') if r.peer_ms.get(n) else (r.peer_notes.get(n) or '-')} | "
                        for n in peers)
        adapted = "; ".join(f"{n}: {r.peer_notes[n]}" for n in peers if r.peer_ms.get(n) and r.peer_notes.get(n))
        lines.append(
            f"| {r.op} | {r.dtype} | {r.shape} | {fmt(r.eager_ms, '.3f')} | {fmt(r.compile_ms, '.3f')} | {cells}"
            f"{fmt(r.cand_ms, '.3f')} ({r.cand_spread or '-'}) | {r.throughput or '-'} | {fmt(r.pct_ceiling, '.0f')} | "
            f"{fmt(r.vs_compile, '.2f')} | {fmt(r.vs_peer, '.2f')} | {fmt(r.vs_eager, '.2f')} | "
            f"{'yes' if r.correct else 'NO' if r.correct is not None else '-'} | {fmt(r.norm_err, '.1e')} | "
            f"{'; '.join(x for x in (r.note, adapted) if x)} |"
        )
    return "\n".join(lines)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(rows: list[Row], ops: list[str], peers: list[str], edge_failures: list[str],
            memory_bound: tuple[str, ...]) -> list[str]:
    """The table, then the edge-shape failures, the geomeans over torch.compile and over the fastest
    peer (whole memory-bound sweep, then per op), and the rows that were incorrect or failed."""
    text = [table(rows, peers), ""]
    text.append(f"edge shapes failed: {len(edge_failures)}" + "".join(f"\n  {f}" for f in edge_failures))
    mb = [r.vs_compile for r in rows if r.op in memory_bound and r.vs_compile]
    text.append(f"geomean x vs torch.compile over the memory-bound sweep ({len(mb)} cases): {fmt(geomean(mb), '.2f')}")
    vp = [r.vs_peer for r in rows if r.op in memory_bound and r.vs_peer]
    text.append(f"geomean x vs the fastest peer over the memory-bound sweep ({len(vp)} cases): {fmt(geomean(vp), '.2f')}")
    for op in ops:
        per_op = geomean([r.vs_compile for r in rows if r.op == op and r.vs_compile])
        per_peer = geomean([r.vs_peer for r in rows if r.op == op and r.vs_peer])
        pct = [r.pct_ceiling for r in rows if r.op == op and r.pct_ceiling is not None]
        if per_op or pct:
            text.append(f"  {op}: geomean x vs compile {fmt(per_op, '.2f')}, x vs fastest peer {fmt(per_peer, '.2f')}, "
                        f"% of ceiling min {fmt(min(pct) if pct else None, '.0f')}%")
    wrong = [f"{r.op} {r.dtype} {r.shape}" for r in rows if r.correct is False]
    text.append(f"incorrect or failed: {', '.join(wrong) if wrong else 'none'}")
    return text


def load_rows(paths: list[Path]) -> list[Row]:
    """Rows saved one JSON object per line (bench_sweep.py's rows.jsonl); a later row of the same op,
    dtype and shape replaces an earlier one (a case measured again)."""
    rows: dict[tuple[str, str, str], Row] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                row = Row(**json.loads(line))
                rows[(row.op, row.dtype, row.shape)] = row
    return list(rows.values())


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    rows = load_rows([Path(a) for a in argv])
    ops = list(dict.fromkeys(r.op for r in rows))
    peers = sorted({name for r in rows for name in r.peer_ms} | {name for r in rows for name in r.peer_notes})
    memory_bound = ("softmax", "rmsnorm", "layernorm", "cross_entropy")
    print("\n".join(summary(rows, ops, peers, [], memory_bound)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
