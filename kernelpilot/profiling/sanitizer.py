"""compute-sanitizer gate: memcheck (and racecheck for kernels that use shared memory).

Runs :mod:`kernelpilot.profiling.target` on a shrunken input (``--small``) with PyTorch's caching
allocator off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``): with caching on, a write a few elements past
a tensor lands inside the allocator's rounded-up block and memcheck cannot see it (we saw exactly
this on the H200: an off-by-one write into a 1000-float tensor reported 0 errors).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelpilot.profiling.runner import cuda_tool, run_sandboxed

_ERROR_START = re.compile(
    r"^=+\s+(?P<what>(Invalid|Misaligned|Out-of-range|Program hit|Error:|Uninitialized|Race|Barrier|Cuda API)[^\n]*)$"
)
_AT = re.compile(r"^=+\s+at\s+(?:0x[0-9a-f]+\s+in\s+)?(?P<func>.+?)(?:\+0x[0-9a-f]+)?"
                 r"(?:\s+in\s+(?P<file>[^:\s]+):(?P<line>\d+))?$")
_THREAD = re.compile(r"^=+\s+by thread \((?P<thread>[^)]*)\) in block \((?P<block>[^)]*)\)")
_ADDRESS = re.compile(r"^=+\s+(?P<address>Address 0x[0-9a-f]+ .*)$")
_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (?P<n>\d+) (?:error|hazard)")


@dataclass
class SanitizerFinding:
    tool: str
    message: str
    kernel: str = ""
    file: str | None = None
    line: int | None = None
    thread: str = ""
    block: str = ""
    detail: str = ""

    def text(self) -> str:
        where = f" at {self.file}:{self.line}" if self.file else ""
        who = f" (thread {self.thread}, block {self.block})" if self.thread else ""
        kernel = f" in {self.kernel}" if self.kernel else ""
        extra = f"; {self.detail}" if self.detail else ""
        return f"[{self.tool}] {self.message}{kernel}{where}{who}{extra}"


@dataclass
class SanitizerReport:
    tools: list[str]
    passed: bool
    findings: list[SanitizerFinding] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""  # the run itself failed (timeout, sanitizer missing, target crashed)

    def text(self) -> str:
        if self.error:
            return f"sanitizer could not run: {self.error}"
        head = f"compute-sanitizer {'+'.join(self.tools)}: " + (
            "clean" if self.passed else f"{len(self.findings)} finding(s)"
        )
        return "\n".join([head, *(f"  {f.text()}" for f in self.findings[:20])])

    def to_dict(self) -> dict:
        return asdict(self)


def parse_output(text: str, tool: str) -> list[SanitizerFinding]:
    """Parse compute-sanitizer's text report into findings (one per reported error)."""
    found: list[SanitizerFinding] = []
    current: SanitizerFinding | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if m := _ERROR_START.match(line):
            current = SanitizerFinding(tool=tool, message=m.group("what").strip())
            found.append(current)
            continue
        if current is None:
            continue
        if (m := _AT.match(line)) and not current.kernel:
            current.kernel = m.group("func").strip()
            if m.group("file"):
                current.file, current.line = m.group("file"), int(m.group("line"))
        elif m := _THREAD.match(line):
            current.thread, current.block = m.group("thread"), m.group("block")
        elif m := _ADDRESS.match(line):
            current.detail = m.group("address").strip()
    return found


def uses_shared_memory(candidate: Path) -> bool:
    files = [candidate] if candidate.is_file() else [*candidate.glob("*.cu"), *candidate.glob("*.cuh")]
    return any("__shared__" in f.read_text(errors="replace") for f in files)


def sanitizer_path() -> str | None:
    return cuda_tool("compute-sanitizer")


def gate_available() -> bool:
    """The approval gate runs when compute-sanitizer and an NVIDIA GPU are present (and it is not
    turned off with KERNELPILOT_SANITIZE=0)."""
    import os

    if os.environ.get("KERNELPILOT_SANITIZE", "1") == "0" or sanitizer_path() is None:
        return False
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no GPU
        return False


def run_sanitizer(
    problem: Path,
    candidate: Path,
    *,
    tools: list[str] | None = None,
    timeout_s: float = 600,
    env: dict[str, str] | None = None,
) -> SanitizerReport:
    """Run memcheck (and racecheck when the candidate uses shared memory) on a small input."""
    binary = sanitizer_path()
    if tools is None:
        tools = ["memcheck"] + (["racecheck"] if uses_shared_memory(candidate) else [])
    if binary is None:
        return SanitizerReport(tools=tools, passed=False,
                               error="compute-sanitizer not found (install the CUDA toolkit)")
    target = [sys.executable, "-m", "kernelpilot.profiling.target", "--problem", str(problem),
              "--candidate", str(candidate), "--small", "--baseline", "none", "--iters", "1"]
    extra = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", **(env or {})}
    report = SanitizerReport(tools=tools, passed=True)
    start = time.monotonic()
    for tool in tools:
        cmd = [binary, "--tool", tool, "--print-limit", "50", "--show-backtrace", "no", *target]
        try:
            proc = run_sandboxed(cmd, timeout_s=timeout_s, extra_env=extra, writable=[candidate.parent])
        except subprocess.TimeoutExpired:
            report.passed, report.error = False, f"{tool} timed out after {timeout_s:.0f} s"
            break
        output = proc.stdout + proc.stderr
        findings = parse_output(output, tool)
        report.findings.extend(findings)
        summary = _SUMMARY.search(output)
        if findings or (summary and int(summary.group("n")) > 0):
            report.passed = False
        elif proc.returncode != 0 or "kernelpilot-target: done" not in output:
            report.passed = False
            report.error = f"{tool}: the program failed (exit {proc.returncode}): {output.strip()[-400:]}"
    report.seconds = time.monotonic() - start
    return report
