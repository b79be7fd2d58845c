"""What the fast kernel-edit build reads from a native candidate's sources, without a compiler.

- the local files each source includes (``#include "..."``, transitively): which ``.cu`` files an edited
  header affects, and which files binding.cpp depends on;
- the explicit instantiations of a ``.cu`` file (``template __global__ void k<...>(...);``, one statement
  each): the units a kernel edit's device code is compiled in, in parallel;
- whether binding.cpp launches its kernels only through kernelpilot/launch.h (a direct runtime call on a
  kernel would reach the kernel of the last full build, not the edited one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.native.code_text import code_digests

LAUNCH_HEADER = "kernelpilot/launch.h"
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(["<])([^">]+)[">]', re.MULTILINE)
# `template` not followed by `<`: an explicit instantiation (or `extern template`, which is no definition).
_INSTANCE = re.compile(r"^[ \t]*template[ \t]+(?!<)[^;{}]*?;", re.MULTILINE | re.DOTALL)
_DEVICE_DATA = re.compile(r"\b__(constant|device|managed)__\b(?![^;{]*\()")  # a device variable, not a function
# Runtime calls that take a kernel: binding.cpp must make them through kp:: (kernelpilot/launch.h).
_DIRECT_CALLS = re.compile(
    r"<<<|\bcuda(LaunchKernel\w*|LaunchCooperativeKernel\w*|FuncSetAttribute|FuncGetAttributes|FuncSetCacheConfig|"
    r"FuncSetSharedMemConfig|Occupancy\w+|GetKernel|FuncGetName|GetFuncBySymbol)\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def strip_comments(text: str, *, strings: bool = True) -> str:
    """``text`` with comments (and, unless ``strings`` is False, the insides of string literals) blanked,
    offsets and line numbers kept."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    def blank_string(match: re.Match[str]) -> str:
        return '"' + " " * (len(match.group(0)) - 2) + '"'

    return _COMMENT.sub(blank, _STRING.sub(blank_string, text) if strings else text)


def local_includes(path: Path, root: Path) -> list[Path]:
    """The files under ``root`` that ``path`` includes, directly or not, in first-seen order."""
    seen: list[Path] = []
    pending = [path]
    while pending:
        current = pending.pop(0)
        try:
            text = strip_comments(current.read_text(encoding="utf-8", errors="replace"), strings=False)
        except OSError:
            continue
        for _kind, name in _INCLUDE.findall(text):
            for base in (current.parent, root):
                found = (base / name).resolve()
                if found.is_file() and found.is_relative_to(root.resolve()):
                    if found not in seen and found != path.resolve():
                        seen.append(found)
                        pending.append(found)
                    break
    return seen


def digest(paths: list[Path]) -> dict[str, str]:
    """sha256 of each file's bytes, by absolute path ("missing" for a file that cannot be read)."""
    return code_digests(paths, code_of=[])[0]


@dataclass(frozen=True)
class Instances:
    """The explicit instantiations of one .cu file: their character spans, and whether the file may be split."""

    spans: list[tuple[int, int]]
    splittable: bool
    why_not: str = ""


def instances(text: str) -> Instances:
    """Explicit instantiation statements at the top level of ``text``. A file with device variables is not
    split (the layout of its constant and global data could differ between a part and the whole)."""
    clean = strip_comments(text)
    spans = [(m.start(), m.end()) for m in _INSTANCE.finditer(clean)
             if not clean[max(0, m.start() - 8):m.start()].rstrip().endswith("extern")]
    if len(spans) < 2:
        return Instances(spans, False, "fewer than two explicit instantiations")
    if _DEVICE_DATA.search(clean):
        return Instances(spans, False, "it defines __device__ or __constant__ data")
    return Instances(spans, True)


def keep_only(text: str, spans: list[tuple[int, int]], keep: set[int]) -> str:
    """``text`` with the instantiations not in ``keep`` (indices into ``spans``) blanked, line numbers kept."""
    parts, last = [], 0
    for i, (start, end) in enumerate(spans):
        parts.append(text[last:start])
        chunk = text[start:end]
        parts.append(chunk if i in keep else re.sub(r"[^\n]", " ", chunk))
        last = end
    parts.append(text[last:])
    return "".join(parts)


def host_launch_problem(binding: Path, root: Path) -> str:
    """Why binding.cpp (with the local headers it includes) cannot take edited kernels without a full build;
    '' when it launches every kernel through kernelpilot/launch.h."""
    files = [binding, *local_includes(binding, root)]
    uses_header = False
    for f in files:
        try:
            raw = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return f"{f.name} cannot be read"
        clean = strip_comments(raw)
        includes = _INCLUDE.findall(strip_comments(raw, strings=False))
        uses_header = uses_header or any(name == LAUNCH_HEADER for _k, name in includes)
        match = _DIRECT_CALLS.search(clean)
        if match:
            line = clean.count("\n", 0, match.start()) + 1
            return (f"{f.name} line {line} calls {match.group(0).strip()} on a kernel directly; launch, configure "
                    f"and query kernels through kp:: ({LAUNCH_HEADER}) so an edit can build device code alone")
    if not uses_header:
        return f"binding.cpp does not launch its kernels through {LAUNCH_HEADER}"
    return ""
