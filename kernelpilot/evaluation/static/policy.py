"""Static policy on candidate code, checked before anything of the candidate runs.

Python sources are parsed with :mod:`ast` (never imported). A finding names a stable rule id, the
file, the line and the offending source line. Rules a project lists in ``relaxed_policy`` still
produce findings, with severity ``"warn"``, so every verdict shows what was relaxed.

Native sources (``.cu``, ``.cpp``, ``.cuh``, ``.h``, and the CUDA/C++ strings of single-file
``load_inline`` candidates) are scanned for calls that reach outside the kernel (processes,
sockets, environment, files, side streams). Those are warnings shown at review: native code can
call anything libc offers, and only the OS-level confinement (confine.py) contains it.

Rule ids (see ``RULES``): ``import-<module>`` for each refused or unlisted module, and the fixed
ids below. Relaxed entries may be exact ids or shell-style patterns (``import-*``).
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterable
from pathlib import Path

from kernelpilot.evaluation.static.native_scan import check_native
from kernelpilot.evaluation.static.policy_tables import (
    ALLOWED_MODULES,
    RULES,
)
from kernelpilot.evaluation.static.python_checker import (
    NOT_ALLOWED,
    PythonChecker,
    module_verdict,
    top_module,
)
from kernelpilot.extracted import generated_files
from kernelpilot.rules import Rules
from kernelpilot.verdict import Finding

__all__ = ["ALLOWED_MODULES", "RULES", "blocking", "check_candidate", "check_native", "check_python", "is_relaxed",
           "unknown_rules"]

NATIVE_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp"})
_BINARY_SUFFIXES = frozenset({".so", ".o", ".a", ".pyc", ".pth", ".dll", ".dylib", ".cubin", ".fatbin"})
_SKIP_DIRS = frozenset({"__pycache__", "build", ".git"})


def is_relaxed(rule: str, relaxed: Iterable[str]) -> bool:
    return any(rule == r or fnmatch.fnmatchcase(rule, r) for r in relaxed)


def unknown_rules(relaxed: Iterable[str]) -> list[str]:
    """Entries of a ``relaxed_policy`` list that match no rule id (likely typos)."""
    known = [k for k in RULES if "<" not in k]
    return [r for r in relaxed if not r.startswith("import-") and not any(fnmatch.fnmatchcase(k, r) for k in known)]


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that reject the candidate."""
    return [f for f in findings if f.severity == "reject"]


# --------------------------------------------------------------------------------------------
# Python


def check_python(source: str, filename: str = "<candidate>", relaxed: Iterable[str] = (),
                 local_modules: Iterable[str] = ()) -> list[Finding]:
    """Findings for one Python source (parsed, never executed); ``local_modules``: the names of the
    candidate's other top-level .py files, which it may import (they are checked too)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as err:
        line = (err.text or "").strip()
        return [Finding(rule="syntax-error", message=f"The file does not parse: {err.msg}.", file=filename,
                        line=err.lineno, evidence=line)]
    checker = PythonChecker(source, filename, local_modules)
    checker.visit(tree)
    findings = _dedupe(checker.findings)
    findings += _embedded_native(tree, filename)
    return _apply_relaxed(findings, relaxed)


def _free_module_name(name: str) -> bool:
    """A candidate file may be imported by this name only if no installed module has it: otherwise
    ``import os`` beside an ``os.py`` would pass the policy and import the real module."""
    import importlib.util
    import sys

    if not name.isidentifier() or name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return False


def _embedded_native(tree: ast.AST, filename: str) -> list[Finding]:
    """Native findings for C/C++/CUDA source held in string constants (load_inline candidates)."""
    out: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_native(node.value):
            for f in check_native(node.value, filename):
                if f.line is not None:
                    f.line += node.lineno - 1
                out.append(f)
    return out


def _looks_native(text: str) -> bool:
    return "\n" in text and any(k in text for k in ("#include", "__global__", "torch::", "extern \"C\"", "PYBIND11"))


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, int | None]] = set()
    out = []
    for f in findings:
        key = (f.rule, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _apply_relaxed(findings: list[Finding], relaxed: Iterable[str]) -> list[Finding]:
    relaxed = list(relaxed)
    for f in findings:
        if f.severity == "reject" and is_relaxed(f.rule, relaxed):
            f.severity = "warn"
            f.message = f"(relaxed by project policy) {f.message}"
    return findings


# --------------------------------------------------------------------------------------------
# Whole candidates

def problem_imports(problem_path: str | Path | None) -> frozenset[str]:
    """The top-level modules the problem file imports that the policy refuses only for not being on the
    allow-list (numpy in KernelBench's level3/30_SwinTransformerV2): a candidate may import them too. A module
    refused for a reason of its own (os, subprocess, ctypes, ...) stays refused, problem or not."""
    path = Path(problem_path) if problem_path is not None else None
    if path is not None and path.is_dir():
        path = path / "problem.py"
    if path is None or not path.is_file():
        return frozenset()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return frozenset()
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return frozenset(top_module(m) for m in modules if module_verdict(m) == NOT_ALLOWED)


def check_candidate(candidate_path: str | Path, relaxed: Iterable[str] = (), rules: Rules | None = None,
                    problem: str | Path | None = None) -> list[Finding]:
    """Check a candidate directory (every .py and native source) or a single-file .py candidate.

    ``rules`` (kernelpilot.rules): under a KernelBench preset a finding refuses only when the preset says
    so (processes, native loaders, sockets); every other one is listed as a warning. ``problem``: the
    problem file, whose own imports of modules off the allow-list the candidate may share (problem_imports)."""
    from kernelpilot.rules import get_rules

    found = _check_candidate(Path(candidate_path), list(relaxed))
    shared = problem_imports(problem)
    for f in found:
        if f.severity == "reject" and f.rule.startswith("import-") and f.rule[len("import-"):] in shared:
            f.severity = "warn"
            f.message += " (Allowed here: the problem file imports it too.)"
    ruleset = get_rules(rules)
    for f in found:
        severity = ruleset.static_severity(f.rule, f.severity)
        if severity != f.severity:  # the message says "refused": say what it is under these rules
            f.message += f" (Under the {ruleset.name} rules this is listed, not refused: the runtime checks decide.)"
        f.severity = severity
    return found


def _check_candidate(path: Path, relaxed: list[str]) -> list[Finding]:
    if path.is_file():
        return check_python(path.read_text(encoding="utf-8", errors="replace"), str(path), relaxed)
    findings: list[Finding] = []
    generated = generated_files(path)  # kernelpilot's drop-in beside an approved candidate: not the candidate's code
    local = [p.stem for p in path.glob("*.py") if _free_module_name(p.stem) and p.name not in generated]
    for file in sorted(path.rglob("*")):
        parts = file.relative_to(path).parts
        if not file.is_file() or _SKIP_DIRS & set(parts[:-1]) or parts[0] in generated:
            continue
        rel = str(file.relative_to(path))
        if file.suffix == ".py":
            findings += check_python(file.read_text(encoding="utf-8", errors="replace"), rel, relaxed,
                                     local if file.parent == path else ())
        elif file.suffix in NATIVE_SUFFIXES:
            findings += check_native(file.read_text(encoding="utf-8", errors="replace"), rel)
        elif file.suffix in _BINARY_SUFFIXES:
            findings.append(Finding(rule="binary-file", file=rel, evidence=file.name, message=(
                "A prebuilt binary or bytecode file sits in the candidate: candidates ship sources only, delete it.")))
    return _apply_relaxed(findings, relaxed)
