"""Unified diffs rendered with syntax highlighting (Pygments through rich), unified or side by side."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

THEME = "monokai"
ADDED_BG = "on #16361f"
REMOVED_BG = "on #3d1717"
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")

_LEXERS = {".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".h": "cpp",
           ".hpp": "cpp", ".c": "c", ".py": "python", ".toml": "toml", ".md": "markdown"}


def lexer_for(path: str) -> str:
    for ext, name in _LEXERS.items():
        if path.endswith(ext):
            return name
    return "text"


@dataclass
class DiffLine:
    tag: str  # " ", "+", "-"
    old_no: int | None
    new_no: int | None
    text: str


@dataclass
class Hunk:
    header: str
    lines: list[DiffLine] = field(default_factory=list)


@dataclass
class FileDiff:
    path: str
    hunks: list[Hunk] = field(default_factory=list)
    note: str = ""  # "new file", "deleted", "binary"


def parse_unified(diff: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    current: FileDiff | None = None
    hunk: Hunk | None = None
    old_no = new_no = 0
    for raw in diff.splitlines():
        if raw.startswith("diff --git "):
            m = re.match(r"diff --git a/(.*) b/(.*)$", raw)
            current = FileDiff(path=m.group(2) if m else raw[11:])
            files.append(current)
            hunk = None
            continue
        if raw.startswith("--- ") and (hunk is None or not hunk.lines or current is None):
            if current is None:
                current = FileDiff(path="")
                files.append(current)
            if raw.strip() == "--- /dev/null":
                current.note = "new file"
            continue
        if raw.startswith("+++ ") and current is not None and hunk is None:
            target = raw[4:].strip()
            if target == "/dev/null":
                current.note = "deleted"
            elif not current.path:
                current.path = target[2:] if target.startswith("b/") else target
            continue
        m = _HUNK.match(raw)
        if m and current is not None:
            old_no, new_no = int(m.group(1)), int(m.group(2))
            hunk = Hunk(header=raw)
            current.hunks.append(hunk)
            continue
        if hunk is None:
            if current is not None and raw.startswith("Binary files"):
                current.note = "binary"
            continue
        if raw.startswith("+"):
            hunk.lines.append(DiffLine("+", None, new_no, raw[1:]))
            new_no += 1
        elif raw.startswith("-"):
            hunk.lines.append(DiffLine("-", old_no, None, raw[1:]))
            old_no += 1
        elif raw.startswith("\\"):
            continue
        else:
            hunk.lines.append(DiffLine(" ", old_no, new_no, raw[1:] if raw else ""))
            old_no += 1
            new_no += 1
    return files


def _highlight(lines: list[str], lexer: str) -> list[Text]:
    if not lines:
        return []
    syntax = Syntax("", lexer, theme=THEME, background_color="default")
    text = syntax.highlight("\n".join(lines))
    out = text.split("\n", allow_blank=True)
    while len(out) < len(lines):
        out.append(Text(""))
    return list(out[: len(lines)])


def _hunk_texts(hunk: Hunk, lexer: str) -> tuple[dict[int, Text], dict[int, Text]]:
    """Highlight the old and the new side of a hunk as whole snippets (keeps multi-line context)."""
    old_idx = [i for i, ln in enumerate(hunk.lines) if ln.tag in " -"]
    new_idx = [i for i, ln in enumerate(hunk.lines) if ln.tag in " +"]
    old = _highlight([hunk.lines[i].text for i in old_idx], lexer)
    new = _highlight([hunk.lines[i].text for i in new_idx], lexer)
    return dict(zip(old_idx, old)), dict(zip(new_idx, new))


def _num(n: int | None, width: int = 4) -> str:
    return " " * width if n is None else str(n).rjust(width)


def _file_header(f: FileDiff) -> Text:
    return Text(f"{f.path}" + (f"  ({f.note})" if f.note else ""), style="bold reverse")


def render_unified(diff: str) -> RenderableType:
    files = parse_unified(diff)
    if not files:
        return Text("No changes against the original." if not diff.strip() else diff)
    out: list[RenderableType] = []
    for f in files:
        out.append(_file_header(f))
        lexer = lexer_for(f.path)
        for hunk in f.hunks:
            out.append(Text(hunk.header, style="cyan"))
            old_t, new_t = _hunk_texts(hunk, lexer)
            for i, ln in enumerate(hunk.lines):
                body = (new_t if ln.tag == "+" else old_t).get(i, Text(ln.text)).copy()
                line = Text()
                line.append(f"{_num(ln.old_no)} {_num(ln.new_no)} {ln.tag} ", style="dim")
                line.append_text(body)
                if ln.tag == "+":
                    line.stylize(ADDED_BG)
                elif ln.tag == "-":
                    line.stylize(REMOVED_BG)
                out.append(line)
    return Group(*out)


def render_side_by_side(diff: str) -> RenderableType:
    files = parse_unified(diff)
    if not files:
        return Text("No changes against the original." if not diff.strip() else diff)
    out: list[RenderableType] = []
    for f in files:
        out.append(_file_header(f))
        lexer = lexer_for(f.path)
        table = Table.grid(expand=True, padding=(0, 1))
        table.add_column(width=4, style="dim")
        table.add_column(ratio=1, overflow="fold")
        table.add_column(width=4, style="dim")
        table.add_column(ratio=1, overflow="fold")
        for hunk in f.hunks:
            table.add_row("", Text(hunk.header, style="cyan"), "", "")
            old_t, new_t = _hunk_texts(hunk, lexer)
            i = 0
            lines = hunk.lines
            while i < len(lines):
                if lines[i].tag == " ":
                    table.add_row(_num(lines[i].old_no), old_t[i], _num(lines[i].new_no), new_t[i])
                    i += 1
                    continue
                removed: list[int] = []
                added: list[int] = []
                while i < len(lines) and lines[i].tag == "-":
                    removed.append(i)
                    i += 1
                while i < len(lines) and lines[i].tag == "+":
                    added.append(i)
                    i += 1
                for k in range(max(len(removed), len(added))):
                    left = right = Text("")
                    lno = rno = ""
                    if k < len(removed):
                        left = old_t[removed[k]].copy()
                        left.stylize(REMOVED_BG)
                        lno = _num(lines[removed[k]].old_no)
                    if k < len(added):
                        right = new_t[added[k]].copy()
                        right.stylize(ADDED_BG)
                        rno = _num(lines[added[k]].new_no)
                    table.add_row(lno, left, rno, right)
        out.append(table)
    return Group(*out)


def diff_summary(diff: str) -> str:
    """'2 files, +10 −3 (kernel.cu, model_new.py)' for messages to the agent."""
    files = parse_unified(diff)
    plus = sum(1 for f in files for h in f.hunks for ln in h.lines if ln.tag == "+")
    minus = sum(1 for f in files for h in f.hunks for ln in h.lines if ln.tag == "-")
    names = ", ".join(f.path.rsplit("/", 1)[-1] for f in files)
    return f"{len(files)} file{'s' if len(files) != 1 else ''}, +{plus} -{minus} ({names})"
