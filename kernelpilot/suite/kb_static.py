"""KernelBench's own static checker (``src/kernelbench/kernel_static_checker.py``), run from a KernelBench
checkout on each solution file, as a column of its own: KernelBench's batch scorer does not call it.

The checker is KernelBench's code, never a copy: it runs in a child process (``sys.executable``), imported
from the checkout's file, on the files given, with the backend detected per file (Triton, ThunderKittens,
TileLang, CuTe, else CUDA) and the run's harness precision. Without a checkout, or a checkout without the
checker (v0.1 has none), every file's column says "not run" and why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CHECKER_PATHS = ("src/kernelbench/kernel_static_checker.py", "src/kernel_static_checker.py")
TIMEOUT_S = 300.0

# a child process: import the checker from its file, check each file, print one JSON document
_DRIVER = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("kernelbench_static_checker", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = {}
for item in json.load(sys.stdin):
    try:
        code = open(item["path"], encoding="utf-8", errors="replace").read()
        valid, errors, warnings = mod.validate_kernel_static(code, backend=item["backend"], precision=item["precision"])
        out[item["path"]] = {"valid": bool(valid), "errors": list(errors), "warnings": list(warnings)}
    except Exception as exc:
        out[item["path"]] = {"error": f"{type(exc).__name__}: {exc}"}
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True)
class StaticResult:
    """KernelBench's static checker on one file: ``valid`` None when it did not run (``not_run`` says why)."""

    valid: bool | None
    backend: str = ""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_run: str = ""

    def label(self) -> str:
        if self.valid is None:
            return f"not run ({self.not_run})"
        return "valid" if self.valid else "invalid: " + "; ".join(e.splitlines()[0][:80] for e in self.errors[:2])


def detect_backend(code: str) -> str:
    """The backend KernelBench's checker should hold a file to, from what the file uses."""
    if re.search(r"@triton\.(jit|autotune)|^\s*import triton|^\s*from triton", code, re.M):
        return "triton"
    if re.search(r"kittens::|#include\s*[<\"]kittens", code):
        return "thunderkittens"
    if re.search(r"^\s*import tilelang|^\s*from tilelang", code, re.M):
        return "tilelang"
    if re.search(r"^\s*import cutlass|^\s*from cutlass|cute::", code, re.M):
        return "cute"
    return "cuda"


def find_checker(checkouts: list[Path]) -> tuple[Path | None, str]:
    """The checker file in the first of ``checkouts`` (a checkout's root, or its ``KernelBench/`` folder of
    levels) that has one; else None and why."""
    if not checkouts:
        return None, ("no KernelBench checkout: pass --kernelbench-checkout PATH (its root, which holds "
                      "src/kernelbench/kernel_static_checker.py)")
    tried = []
    for root in checkouts:
        for base in (root, root.parent):
            for rel in CHECKER_PATHS:
                if (base / rel).is_file():
                    return (base / rel).resolve(), ""
        tried.append(str(root))
    return None, (f"no kernel_static_checker.py in {', '.join(tried)} (looked for {' or '.join(CHECKER_PATHS)}; "
                  "KernelBench v0.1 has none: pass a current checkout with --kernelbench-checkout)")


def run_checker(checker: Path | None, files: list[Path], precision: str = "fp32",
                why: str = "") -> dict[str, StaticResult]:
    """KernelBench's checker on every file (keys: the files as given, as strings)."""
    if checker is None:
        return {str(f): StaticResult(None, not_run=why or "no checker") for f in files}
    results: dict[str, StaticResult] = {}
    items = []
    for f in files:
        try:
            code = f.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            results[str(f)] = StaticResult(None, not_run=f"cannot read the file: {exc.strerror or exc}")
            continue
        items.append({"path": str(f), "backend": detect_backend(code), "precision": precision})
    if not items:
        return results
    try:
        proc = subprocess.run([sys.executable, "-c", _DRIVER, str(checker)], input=json.dumps(items),
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
        failure = "" if out is not None else (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        out, failure = None, f"{type(exc).__name__}: {exc}"[:200]
    for item in items:
        got = (out or {}).get(item["path"])
        if got is None or "error" in got:
            reason = got["error"][:200] if got else f"the checker failed: {failure}"
            results[item["path"]] = StaticResult(None, item["backend"], not_run=reason)
        else:
            results[item["path"]] = StaticResult(got["valid"], item["backend"], got["errors"], got["warnings"])
    return results
