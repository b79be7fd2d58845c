"""Scan of native candidate sources (.cu, .cpp, .cuh, .h, load_inline strings) for calls that
reach outside the kernel. Part of the static policy (policy.py re-exports ``check_native``).

Native code can call anything libc offers; these findings are warnings for the engineer's review,
except compile-time reads of files outside the candidate, which are refused.
"""

from __future__ import annotations

import re

from kernelpilot.verdict import Finding

_NATIVE_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("native-process", re.compile(r"\b(system|popen|v?fork|exec[lv]p?e?|execvpe|posix_spawnp?|clone)\s*\("),
     "runs or forks processes"),
    ("native-dlopen", re.compile(r"\b(dlopen|dlsym|dlmopen)\s*\("), "loads libraries at run time"),
    ("native-network", re.compile(r"\b(socket|connect|bind|getaddrinfo|gethostbyname)\s*\("),
     "opens network connections"),
    ("native-env", re.compile(r"\b(getenv|secure_getenv|setenv|putenv)\s*\(|\benviron\b"),
     "reads or changes the environment"),
    ("native-thread", re.compile(r"std::(thread|jthread|async)\b|\bpthread_create\s*\("),
     "starts threads the timer does not see"),
    ("native-file", re.compile(r"\b(fopen|freopen|open|openat|creat|unlink|remove|rename)\s*\(|std::[io]?fstream\b"),
     "opens or changes files"),
    ("native-side-stream",
     re.compile(r"\b(cudaStreamCreate\w*|cublasSetStream\w*|cudnnSetStream|cudaStreamBeginCapture)\s*\("),
     "uses its own CUDA stream, which the timer may not see"),
)
# Compile-time reads of files outside the candidate: their contents land in the binary or, through
# compiler errors, in build logs that reach the model. Refused, not merely warned about.
_NATIVE_REJECT: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("native-include-outside",
     re.compile(r'^\s*#\s*(?:include|embed)\s*"(?:/|[^"]*\.\./)|^\s*#\s*(?:include|embed)\s*<\s*/'),
     "includes a file outside the candidate and the toolchain"),
    ("native-include-outside", re.compile(r"\.incbin\b"), "embeds an arbitrary file with .incbin"),
)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def check_native(source: str, filename: str = "<native>") -> list[Finding]:
    """Findings for C/C++/CUDA source that reaches outside the kernel, with line numbers.

    All are warnings except ``native-include-outside`` (compile-time reads of other files).
    """
    # Blank comments but keep line numbers.
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    lines = source.splitlines()
    out: list[Finding] = []
    for lineno, line in enumerate(code.splitlines(), start=1):
        for rule, pattern, what in _NATIVE_REJECT:
            if pattern.search(line):
                out.append(Finding(rule=rule, severity="reject", file=filename, line=lineno,
                                   evidence=lines[lineno - 1].strip() if lineno <= len(lines) else "",
                                   message=f"Native code {what}: refused, a candidate includes only its own "
                                   "files and toolchain headers."))
        if line.lstrip().startswith("#include"):
            continue
        for rule, pattern, what in _NATIVE_PATTERNS:
            m = pattern.search(line)
            if m:
                out.append(Finding(rule=rule, severity="warn", file=filename, line=lineno,
                                   evidence=lines[lineno - 1].strip() if lineno <= len(lines) else "",
                                   message=f"Native code {what} ({m.group(0).strip()}): review it before approving."))
    return out
