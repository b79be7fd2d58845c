"""The candidates table with a sparkline of speedup over candidates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label, Sparkline

from kernelpilot.tui.verdict_view import row_cells, speedup, status_style, verdict_of
from kernelpilot.verdict import Verdict

COLUMNS = ("id", "status", "correctness", "time", "x eager", "x compile", "%SOL", "flags")
WIDTHS = (5, 9, 11, 9, 7, 9, 4, 5)  # fixed: auto widths lag behind rows added in a burst
SHORT_STATUS = {"build_error": "build err", "runtime_error": "crashed", "timeout": "timeout",
                "rejected": "flagged", "superseded": "replaced"}  # 9 columns: a newer save replaced it


@dataclass
class CandidateRecord:
    candidate_id: str
    verdict: Verdict
    diff: str = ""
    commit: str = ""
    source: str = "agent"
    summary: str = ""
    state: str = ""  # "" | "proposed" | "approved" | "rejected"
    approved_commit: str = ""
    reason: str = ""


class CandidatesPanel(Vertical):
    class Selected(Message):
        def __init__(self, candidate_id: str) -> None:
            super().__init__()
            self.candidate_id = candidate_id

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.records: dict[str, CandidateRecord] = {}

    def compose(self) -> ComposeResult:
        table: DataTable[Any] = DataTable(cursor_type="row", zebra_stripes=True, id="candidates-table")
        yield table
        yield Label("speedup vs eager over candidates", id="spark-label")
        yield Sparkline([], id="speedup-spark")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col, width in zip(COLUMNS, WIDTHS):
            table.add_column(col, width=width, key=col)
        self._render_spark()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one(DataTable)

    def upsert(self, candidate_id: str, verdict: dict[str, Any] | Verdict, **fields: Any) -> CandidateRecord:
        v = verdict_of(verdict)
        rec = self.records.get(candidate_id)
        if rec is None:
            rec = CandidateRecord(candidate_id=candidate_id, verdict=v)
            self.records[candidate_id] = rec
        else:
            rec.verdict = v
        for key, value in fields.items():
            if value not in (None, ""):
                setattr(rec, key, value)
        self._render_row(rec)
        self._render_spark()
        return rec

    def set_state(self, candidate_id: str, state: str, **fields: Any) -> CandidateRecord | None:
        rec = self.records.get(candidate_id)
        if rec is None:
            return None
        rec.state = state
        for key, value in fields.items():
            setattr(rec, key, value)
        self._render_row(rec)
        return rec

    def _render_row(self, rec: CandidateRecord) -> None:
        cells: list[Any] = list(row_cells(rec.candidate_id, rec.verdict, rec.source))
        style = status_style(rec.verdict)
        cells[1] = SHORT_STATUS.get(rec.verdict.status, cells[1])
        if rec.state:
            cells[1] = rec.state
            style = {"approved": "bold green", "rejected": "dim", "proposed": "bold yellow"}[rec.state]
        cells[1] = Text(str(cells[1]), style=style)
        table = self.table
        if rec.candidate_id in table.rows:
            for col, value in zip(COLUMNS, cells):
                table.update_cell(rec.candidate_id, col, value)
        else:
            table.add_row(*cells, key=rec.candidate_id)

    def _render_spark(self) -> None:
        """Only what was measured: candidates that are correct and timed (no bars for the others)."""
        data = [x for x in (speedup(r.verdict) for r in self.records.values()) if x > 0]
        spark = self.query_one(Sparkline)
        spark.data = data
        spark.display = bool(data)
        label = "speedup vs eager over candidates"
        label += f" (best {max(data):.2f}x)" if data else ": nothing timed yet"
        self.query_one("#spark-label", Label).update(label)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Selected(str(event.row_key.value)))
