"""code_text.py: what the host compiler reads of a file, so a comment-only save of binding.cpp's files keeps the
device-only build. Each pair is (before, after, whether the compiler reads the same): a wrong True would run the
last full build's host code for changed code, so the cases lean on literals, splices and header names."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kernelpilot.native.code_text import code_digests, code_text

CASES = [
    ("a comment changed, one appended at the end", "int a; // x\nint b;\n", "int a; // yy\nint b;\n// more\n\n", True),
    ("a block comment of the same lines", "/* a\nb */int x;\n", "/* c\nd */int x;\n", True),
    ("a comment after an include", '#include "a.h" // why\n', '#include "a.h" // because\n', True),
    ("a line comment spliced onto the next line", "// a \\\nint x;\nint z;\n", "// a \\\nint y;\nint z;\n", True),
    ("code", "int a = 1;\n", "int a = 2;\n", False),
    ("a comment line added above code: __LINE__ moves", "// a\nint x;\n", "// a\n// b\nint x;\n", False),
    ("// inside a string", 'const char* s = "a // b";\n', 'const char* s = "a // c";\n', False),
    ("an escaped quote", 's = "a\\" // b";\n', 's = "a\\" // c";\n', False),
    ("a raw string", 's = R"x(a " // b)x";\n', 's = R"x(a " // c)x";\n', False),
    ("a raw string with no end", 's = R"x(a // b\n', 's = R"x(a // c\n', False),
    ("a digit separator", "n = 1'000; // a\n", "n = 1'000; // b\n", False),
    ("a block comment ended across a splice", "/* a *\\\n/ int x;\n", "/* a *\\\n/ int y;\n", False),
    ("a string spliced across lines", 's = "a\\\n// b";\n', 's = "a\\\n// c";\n', False),
    ("a splice with blanks before the line break (GCC)", 's = "a\\  \n// b";\n', 's = "a\\  \n// c";\n', False),
    ("an include's header name", "#include <a/*b*/c.h>\n", "#include <a/*d*/c.h>\n", False),
    ("a macro's parameter list", "#define F(x) x\n", "#define F (x) x\n", False),
    ("a quote in a character literal", "c = '\"'; // q\nint y;\n", "c = '\"'; // r\nint y;\n", True),
    ("an unclosed string", 's = "a // b\nint x;\n', 's = "a // c\nint x;\n', False),
]


@pytest.mark.parametrize("before,after,same", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_code_text_is_equal_only_where_the_compiler_reads_the_same(before: str, after: str, same: bool) -> None:
    assert (code_text(before) == code_text(after)) is same


def test_lines_are_kept_for_every_token() -> None:
    text = "int a; /* one\ntwo */ int b; // c \\\nd\nint e;\n"
    code = code_text(text)
    assert code.count("\n") == text.rstrip().count("\n")
    assert [i for i, line in enumerate(code.splitlines()) if "int e" in line] == [3]


def test_digests_read_each_file_once_and_name_a_missing_one(tmp_path: Path) -> None:
    a, b = tmp_path / "a.h", tmp_path / "b.h"
    a.write_text("int x; // one\n")
    b.write_text("int x; // two\n")
    raw, code = code_digests([a, b, tmp_path / "gone.h"])
    assert raw[str(a)] != raw[str(b)] and code[str(a)] == code[str(b)]
    assert raw[str(tmp_path / "gone.h")] == code[str(tmp_path / "gone.h")] == "missing"


def _piece(rng: random.Random) -> tuple[str, str]:
    """One random piece of a C++ file and its kind: code, a literal (code too), or a comment."""
    kind = rng.choice(["code", "code", "string", "char", "raw", "line", "block", "include", "splice"])
    word = "".join(rng.choice("ab/*'\"\\ x()_;") for _ in range(rng.randint(0, 6)))
    safe = word.replace("\\", "").replace('"', "").replace("'", "").replace("*/", "").replace("/", "")
    if kind == "code":
        return "code", rng.choice(["int x = 1;", "y /= 2;", "a * b", "f(x)", "#define F(x) x", "\n", " "])
    if kind == "string":
        return "code", '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind == "char":
        return "code", "'" + rng.choice(["a", "/", "\\'", '"', "*"]) + "'"
    if kind == "raw":
        return "code", 'R"d(' + word.replace(')d"', "") + ')d"'
    if kind == "include":
        return "code", "\n#include <" + safe + ".h>\n"
    if kind == "splice":
        return "code", "\\\n"
    if kind == "line":
        return "comment", "// " + word.replace("\\", "").replace("\n", "") + "\n"
    return "comment", "/* " + word.replace("*/", "").replace("*", "") + " */"


def test_random_files_change_code_text_exactly_when_code_changes() -> None:
    """Files built from random pieces: rewriting a comment's words keeps the code text; rewriting any code piece
    (a literal's contents included) changes it."""
    rng = random.Random(52)
    for _ in range(400):
        pieces = [_piece(rng) for _ in range(rng.randint(1, 12))]
        text = "".join(p for _, p in pieces)
        at = rng.randrange(len(pieces))
        kind, old = pieces[at]
        if kind == "comment":
            new = old.replace(old[3:-3] if old.startswith("/*") else old[3:-1], "zz q", 1) if len(old) > 6 else old
            if old.startswith("//") and old.endswith("\\\n"):
                continue
            same = True
        else:
            new = old + "k" if not old.endswith("\n") else old[:-1] + "k\n"
            same = False
        edited = "".join(p if i != at else new for i, (_, p) in enumerate(pieces))
        assert (code_text(text) == code_text(edited)) is same, (text, edited)
