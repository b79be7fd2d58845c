"""Kernel edits through the device-only build, on the GPU: speed, SASS identity, and that the edit is what runs.

    python benchmarks/device_edits.py --out OUT [--examples softmax,rmsnorm] [--edits 4]

Per example (a git copy, never built before; one Evaluator with its standby builder, as the pairing UI):
a cold test verdict (full build), then ``--edits`` kernel edits (a ``#pragma unroll`` count changed, plus a
unique comment so the source was never compiled before), each a test verdict with its build path and
seconds; one edit that breaks the kernel's result (must be ``incorrect``: the edited kernel is the one that
ran); the file restored; one benchmark after an edit (the SASS check waited for). Writes OUT/device-edits.json
and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from edit_loop import copy_example  # noqa: E402

_PRAGMA = re.compile(r"^(\s*)#pragma unroll(\s+\d+)?\s*$")
# an edit per example that changes the result: (the .cu file, the text, its replacement)
BREAKS = {
    "softmax": ("softmax.cu", "* inv_sum;", "* inv_sum * 2.f;"),
    "rmsnorm": ("rmsnorm.cu", "* inv_rms", "* inv_rms * 2.f"),
}


def kernel_file(candidate: Path) -> Path:
    return sorted(candidate.glob("*.cu"))[0]


def unroll_edit(text: str, n: int) -> str:
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if _PRAGMA.match(line)), None)
    if at is not None:
        lines[at] = f"{_PRAGMA.match(lines[at])[1]}#pragma unroll {(1, 2, 4)[n % 3]}"  # type: ignore[index]
    lines.append(f"// device_edits.py edit {n} {os.urandom(4).hex()}")
    return "\n".join(lines) + "\n"


def record(v: Any, wall: float, what: str) -> dict[str, Any]:
    b = v.build
    return {"edit": what, "status": v.status, "wall_s": round(wall, 3), "phases": dict(v.phases),
            "build_s": b.seconds if b else None, "command": b.command[:120] if b else "",
            "sass_check": b.sass_check if b else "", "notes": [d.message[:160] for d in (b.diagnostics if b else [])
                                                              if d.severity != "warning"][:3],
            "error": (v.error or "")[:300], "summary": v.summary[:160],
            "references_cached": v.correctness.references_cached if v.correctness else None}


def measure(name: str, edits: int, work: Path) -> dict[str, Any]:
    from kernelpilot.config import load_config
    from kernelpilot.evaluation import EvalSettings, Evaluator

    example = copy_example(name, work, False)
    problem, candidate = example / "problem.py", example / "candidate"
    config = load_config(example, overrides={"problem": str(problem)}, env={})
    settings = EvalSettings.from_config(config, device="cuda", build_timeout_s=600.0)
    cu = kernel_file(candidate)
    original = cu.read_text()
    row: dict[str, Any] = {"example": name, "edits": []}

    def run(mode: str, what: str) -> dict[str, Any]:
        t0 = time.monotonic()
        v = ev.evaluate(problem, candidate, mode)
        rec = record(v, time.monotonic() - t0, what)
        print(f"  {name} {what}: {rec['status']} {rec['wall_s']} s (build {rec['build_s']} s) {rec['command'][:60]}"
              f" sass={rec['sass_check']}", flush=True)
        return rec

    with Evaluator(settings, workdir=work / f"eval-{name}", standby_builder=True) as ev:
        row["cold"] = run("test", "cold")
        for n in range(1, edits + 1):
            cu.write_text(unroll_edit(original, n))
            row["edits"].append(run("test", f"kernel edit {n}"))
        if name in BREAKS:
            file, old, new = BREAKS[name]
            target = candidate / file
            text = target.read_text()
            if old in text:
                target.write_text(text.replace(old, new, 1))
                row["broken"] = run("test", "breaking edit")
        cu.write_text(unroll_edit(original, edits + 1))
        row["benchmark"] = run("benchmark", "benchmark after an edit")
        cu.write_text(original)
        row["restored"] = run("test", "restored")
    walls = [e["wall_s"] for e in row["edits"]]
    row["warm_kernel_s"] = round(statistics.median(walls), 3) if walls else None
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--examples", default="softmax")
    p.add_argument("--edits", type=int, default=4)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kp-device-edits-"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rows = []
    for name in [n for n in args.examples.split(",") if n]:
        rows.append(measure(name, args.edits, work))
        (args.out / "device-edits.json").write_text(json.dumps({"commit": commit, "rows": rows}, indent=1))
    print(f"\ncommit {commit}")
    print(f"{'example':<24} {'cold':>6} {'edit median':>11} {'benchmark':>9} {'broken':>10} sass")
    for r in rows:
        print(f"{r['example']:<24} {r['cold']['wall_s']:>6} {r['warm_kernel_s']!s:>11} {r['benchmark']['wall_s']:>9} "
              f"{r.get('broken', {}).get('status', '-'):>10} {r['benchmark']['sass_check']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
