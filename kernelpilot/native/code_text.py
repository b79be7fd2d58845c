"""What a C++ compiler reads of a source file, without its comments: so a save that changed only comments in
binding.cpp or a header it includes is known to leave the host code as the last full build compiled it.

:func:`code_text` follows the translation phases that matter here (GCC's, the host compiler's): line splices
(a backslash, optional blanks, a line break) first; then each comment becomes one space, keeping the line breaks
it held so every token stays on its line (``__LINE__``, the debug info); string, character and raw string literals
and ``#include`` header names are kept as written. Blank space at the very end of the file is dropped (it moves
no token).

Every doubt resolves towards keeping characters: an unclosed literal runs to the end of its line, a raw string
with no end to the end of the file, and an apostrophe always opens a character literal (a digit separator's text
is then kept as written). So code is never taken for a comment, and two files with the same code text compile to
the same program; a comment can be taken for code, which costs only a full build. No torch import here.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_SPLICE = re.compile(r"\\[ \t\f\v]*\r?\n")
_INCLUDE_NAME = re.compile(r'[ \t]*#[ \t]*include[ \t]*(<[^>\n]*>|"[^"\n]*")')
_RAW_DELIMITER = re.compile(r'([^ ()\\\t\v\f\n"]{0,16})\(')


def _literal_end(s: str, i: int) -> int:
    """The end of the string or character literal opened at ``s[i]`` (its closing quote, or its line's end)."""
    quote, j, n = s[i], i + 1, len(s)
    while j < n and s[j] != "\n":
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == quote:
            return j + 1
        j += 1
    return min(j, n)


def _raw_end(s: str, i: int) -> int | None:
    """The end of the raw string literal whose quote is ``s[i]`` (after an ``R``); None when none opens there."""
    found = _RAW_DELIMITER.match(s, i + 1)
    if found is None:
        return None
    close = s.find(")" + found.group(1) + '"', found.end())
    return len(s) if close < 0 else close + len(found.group(1)) + 2


def _comment_end(s: str, i: int) -> int | None:
    """The end of the comment that starts at ``s[i]``; None when none does."""
    if s.startswith("//", i):
        end = s.find("\n", i)
        return len(s) if end < 0 else end
    if s.startswith("/*", i):
        end = s.find("*/", i + 2)
        return len(s) if end < 0 else end + 2
    return None


def _comments(s: str) -> list[tuple[int, int]]:
    """The comments of ``s`` (no line splices left in it), as (start, end) offsets."""
    spans: list[tuple[int, int]] = []
    i, n, line_start = 0, len(s), True
    while i < n:
        if line_start:
            header = _INCLUDE_NAME.match(s, i)
            if header is not None:
                i, line_start = header.end(), False
                continue
        c = s[i]
        line_start = c == "\n"
        if c == '"' and i > 0 and s[i - 1] == "R":
            end = _raw_end(s, i)
            i = end if end is not None else _literal_end(s, i)
        elif c in "\"'":
            i = _literal_end(s, i)
        elif c == "/" and (end := _comment_end(s, i)) is not None:
            spans.append((i, end))
            i = end
        else:
            i += 1
    return spans


def code_text(text: str) -> str:
    """``text`` as the compiler reads it, comments blanked (the module's docstring says how)."""
    pieces: list[str] = []
    splices: list[int] = []  # each splice's offset in the text without splices
    last = length = 0
    for m in _SPLICE.finditer(text):
        pieces.append(text[last:m.start()])
        length += m.start() - last
        splices.append(length)
        last = m.end()
    pieces.append(text[last:])
    logical = "".join(pieces)
    out: list[str] = []
    shift: list[tuple[int, int, int]] = []  # (comment start, end, its text's offset in the output)
    done = size = 0
    for start, end in _comments(logical):
        out.append(logical[done:start])
        size += start - done
        shift.append((start, end, size))
        kept = " " + "\n" * logical.count("\n", start, end)
        out.append(kept)
        size += len(kept)
        done = end
    out.append(logical[done:])
    code = "".join(out)
    # the splices go back where they were (one inside a comment after its space), so the lines stay counted
    places, k, moved = [], 0, 0
    for offset in splices:
        while k < len(shift) and shift[k][1] <= offset:
            start, end, at = shift[k]
            moved = at + (1 + logical.count("\n", start, end)) - end
            k += 1
        inside = k < len(shift) and shift[k][0] <= offset < shift[k][1]
        places.append(shift[k][2] + 1 if inside else offset + moved)
    for place in reversed(places):
        code = code[:place] + "\\\n" + code[place:]
    return code.rstrip()


def code_digests(paths: list[Path], code_of: list[Path] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Per file, by absolute path, read once: sha256 of its bytes, and, for the files of ``code_of`` (default: all),
    sha256 of its :func:`code_text` ("missing" for a file that cannot be read)."""
    wanted = None if code_of is None else {str(p.resolve()) for p in code_of}
    raw: dict[str, str] = {}
    code: dict[str, str] = {}
    for p in paths:
        key = str(p.resolve())
        want = wanted is None or key in wanted
        try:
            data = p.read_bytes()
        except OSError:
            raw[key] = "missing"
            if want:
                code[key] = "missing"
            continue
        raw[key] = hashlib.sha256(data).hexdigest()
        if want:
            code[key] = hashlib.sha256(code_text(data.decode("utf-8", errors="surrogateescape")).encode(
                "utf-8", errors="surrogateescape")).hexdigest()
    return raw, code
