"""What the session knows about its candidates: verdict, checkpoint commit and the files' hash."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CandidateRecord:
    id: str
    verdict: dict[str, Any]
    commit: str = ""
    files_hash: str = ""
    diff: str = ""
    mode: str = "benchmark"

    @property
    def ok(self) -> bool:
        return self.verdict.get("status") == "ok"

    @property
    def median_ms(self) -> float | None:
        perf = self.verdict.get("performance") or {}
        cand = perf.get("candidate") or {}
        value = cand.get("median_ms")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def tier(self) -> str:
        return str((self.verdict.get("performance") or {}).get("tier") or "incorrect")

    @property
    def speedup_vs_compile(self) -> float | None:
        value = (self.verdict.get("performance") or {}).get("speedup_vs_compile")
        return float(value) if isinstance(value, (int, float)) else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CandidateBook:
    records: dict[str, CandidateRecord] = field(default_factory=dict)
    counter: int = 0
    approved: str = ""
    approved_commit: str = ""
    pending: str = ""  # a proposal left for the engineer (auto-approve "never")

    def next_id(self) -> str:
        self.counter += 1
        while f"c{self.counter}" in self.records:
            self.counter += 1
        return f"c{self.counter}"

    def add(self, record: CandidateRecord) -> None:
        self.records[record.id] = record
        if record.id.startswith("c") and record.id[1:].isdigit():
            self.counter = max(self.counter, int(record.id[1:]))

    def get(self, candidate_id: str) -> CandidateRecord | None:
        return self.records.get(candidate_id)

    def for_hash(self, files_hash: str) -> CandidateRecord | None:
        """The latest benchmarked candidate whose files are exactly these."""
        for record in reversed(list(self.records.values())):
            if record.files_hash == files_hash:
                return record
        return None

    def best(self) -> CandidateRecord | None:
        """The fastest correct (status ok) candidate."""
        ok = [r for r in self.records.values() if r.ok and r.median_ms is not None]
        if not ok:
            return None
        return min(ok, key=lambda r: r.median_ms or float("inf"))
