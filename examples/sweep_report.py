"""The example sweep's rows and its report (bench_sweep.py): the table of our kernel against eager,
torch.compile and the library peers, and the geomeans under it.

    python examples/sweep_report.py OUT1/rows.jsonl [OUT2/rows.jsonl ...]   # the report of saved rows
    python examples/sweep_report.py --markdown rows.jsonl   # RESULTS.md's tables: one per op, peers' reasons as notes
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


COPY_TBPS = 4.25  # the copy ceiling the targets are stated against (h200-measured.md)


def compact_tables(rows: list[Row], peers: list[str], target_pct: float = 90.0, tie: float = 0.98) -> str:
    """One table per op for RESULTS.md: N, the times, our rate against the copy ceiling, the ratios, and
    whether the case meets the targets (>= target_pct of the ceiling, and at least `tie` x the fastest
    peer). A peer that did not run gets a lettered note with its reason under the table."""
    out: list[str] = []
    for op in dict.fromkeys(r.op for r in rows):
        reasons: dict[str, str] = {}
        lines = [f"**{op}**", "",
                 "| dtype | shape | eager ms | compile ms | " + "".join(f"{n} ms | " for n in peers)
                 + "ours ms | TB/s | % of 4.25 | x compile | x fastest peer | targets |",
                 "|" + "---|" * (10 + len(peers))]
        for r in (r for r in rows if r.op == op):
            cells = []
            for n in peers:
                if r.peer_ms.get(n):
                    cells.append(f"{r.peer_ms[n]:.3f}")
                else:
                    why = r.peer_notes.get(n) or "not run"
                    key = why.split(", normalised error")[0] if why.startswith("incorrect") else why
                    if "Cannot launch Triton kernel since n = " in key:  # one note for every N past the cap
                        key = key.split(" since n = ")[0] + " since N exceeds" + key.split("exceeds", 1)[1]
                    letter = reasons.setdefault(key, "abcdefgh"[len(reasons) % 8])
                    cells.append(f"- ({letter})")
            rate = (r.pct_ceiling or 0) * COPY_TBPS / 100 if r.throughput.endswith("TB/s") else None
            ok_rate = r.pct_ceiling is not None and r.pct_ceiling >= target_pct
            ok_peer = r.vs_peer is None or r.vs_peer >= tie
            verdict = "met" if ok_rate and ok_peer else "missed: " + ", ".join(
                x for x, bad in (("% of ceiling", not ok_rate), ("peer", not ok_peer)) if bad)
            lines.append(f"| {r.dtype} | {r.shape} | {fmt(r.eager_ms, '.3f')} | {fmt(r.compile_ms, '.3f')} | "
                         + "".join(f"{c} | " for c in cells)
                         + f"{fmt(r.cand_ms, '.3f')} | {fmt(rate, '.2f')} | {fmt(r.pct_ceiling, '.0f')} | "
                         f"{fmt(r.vs_compile, '.2f')} | {fmt(r.vs_peer, '.2f')} | {verdict} |")
        out += lines + [""] + [f"({letter}) {why}" + "  " for why, letter in reasons.items()] + [""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    markdown = bool(argv) and argv[0] == "--markdown"
    argv = argv[1:] if markdown else argv
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    rows = load_rows([Path(a) for a in argv])
    ops = list(dict.fromkeys(r.op for r in rows))
    peers = sorted({name for r in rows for name in r.peer_ms} | {name for r in rows for name in r.peer_notes})
    memory_bound = ("softmax", "rmsnorm", "layernorm", "cross_entropy")
    if markdown:
        print(compact_tables([r for r in rows if r.op in memory_bound], peers))
    print("\n".join(summary(rows, ops, peers, [], memory_bound)[1:] if markdown else
                    summary(rows, ops, peers, [], memory_bound)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
