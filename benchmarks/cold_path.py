"""The evaluation's cold path and hang watchdog, measured (issue 14).

    python3 benchmarks/cold_path.py OUTDIR

For a native candidate (examples/softmax: binding.cpp + softmax.cu) and a KernelBench single-file
candidate (benchmarks/data/kb_scale_add.py, load_inline with torch/extension.h): the one-time
precompiled-header builds (reported apart), then cold edit -> verdict (sources never built, a fresh
Evaluator: worker start included) in test and benchmark mode (the single-file one in test mode), a warm edit, and the same single-file
candidate again in a new Evaluator (the build cache). For a planted hang (the corpus's spinning
kernel): seconds from the end of its build to the ``timeout`` verdict, in test and benchmark mode,
and the next verdict on the same Evaluator. Writes OUTDIR/cold_path.json and prints a table last.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial_corpus import CASES, PROBLEMS, materialize  # noqa: E402

from kernelpilot.evaluation import EvalSettings, Evaluator  # noqa: E402
from kernelpilot.evaluation.build import pch  # noqa: E402
from kernelpilot.verdict import Verdict  # noqa: E402

SOFTMAX = ROOT / "examples" / "softmax"
KB_CANDIDATE = ROOT / "benchmarks" / "data" / "kb_scale_add.py"
SCALE_ADD = PROBLEMS["scale_add"]
SETTINGS = EvalSettings()


def environment() -> dict[str, str]:
    import torch

    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "cuda": str(torch.version.cuda), "python": platform.python_version(),
            "cpus": str(__import__("os").cpu_count())}


def fresh_native(work: Path, tag: str) -> Path:
    """A copy of the softmax candidate in a directory never built before (its build dir is keyed on the path)."""
    dest = work / f"softmax-{tag}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(SOFTMAX / "candidate", dest)
    return dest


def fresh_kb(work: Path, tag: str) -> Path:
    """The single-file candidate with a unique comment: new bytes, so never built before."""
    dest = work / f"kb_{tag}_{uuid.uuid4().hex[:8]}.py"
    dest.write_text(f"# {dest.stem}\n" + KB_CANDIDATE.read_text())
    return dest


def record(v: Verdict, wall: float) -> dict[str, Any]:
    build = v.build
    return {"status": v.status, "wall_s": round(wall, 2), "phases": v.phases, "error": v.error[:300],
            "build_s": build.seconds if build else None, "pch": build.pch if build else "",
            "cache": build.cache if build else "", "rebuilt": build.rebuilt if build else [],
            "after_build_s": round(v.seconds - v.phases.get("build", 0.0), 2), "flags": v.flags[:3],
            "summary": v.summary}


HEADER = f"{'run':52} {'status':10} {'wall s':>7} {'build s':>8} {'after build s':>14}  pch / cache"


def line(name: str, r: dict[str, Any]) -> str:
    return (f"{name:52} {r['status']:10} {r['wall_s']:7.1f} {r['build_s'] or 0:8.1f} {r['after_build_s']:14.1f}  "
            f"{r['cache'] or r['pch'][:70]}")


def evaluate(ev: Evaluator, problem: Path, candidate: Path, mode: str) -> dict[str, Any]:
    t0 = time.monotonic()
    v = ev.evaluate(problem, candidate, mode)
    return record(v, time.monotonic() - t0)


class Runs(dict):  # type: ignore[type-arg]
    """Each run printed and saved the moment it finishes: a run cut short by its time limit keeps them."""

    def __init__(self, result: dict[str, Any], path: Path) -> None:
        super().__init__()
        self.result, self.path = result, path
        result["runs"] = self
        print(HEADER, flush=True)

    def __setitem__(self, name: str, r: dict[str, Any]) -> None:
        super().__setitem__(name, r)
        print(line(name, r), flush=True)
        self.path.write_text(json.dumps(self.result, indent=1))


def wait_for_pch(timeout: float = 600.0) -> list[dict[str, Any]]:
    """Wait for background precompiled-header builds; their one-time build seconds."""
    root = pch.cache_dir()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entries = [pch.Entry(root, d.name) for d in root.iterdir() if d.is_dir() and d.name != "bin"] if root.is_dir() else []
        if entries and not any(e.building() for e in entries):
            break
        time.sleep(1.0)
    built = []
    for e in entries:
        try:
            meta = json.loads(e.meta.read_text())
        except (OSError, ValueError):
            built.append({"key": e.key, "preamble": e.header.read_text() if e.header.exists() else "", "built": False})
            continue
        built.append({"key": e.key, "preamble": e.header.read_text(), "built": True, "seconds": meta["seconds"],
                      "mb": round(e.gch.stat().st_size / 2**20)})
    return built


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kp-cold-"))
    result: dict[str, Any] = {"environment": environment()}

    hang = next(c for c in CASES if c.name == "hang_infinite_loop")
    honest = next(c for c in CASES if c.name == "honest_scale_add")
    # one-time: a build of each kind starts its precompiled header's build in the background
    with Evaluator(SETTINGS, workdir=work / "prime") as ev:
        result["prime_native"] = evaluate(ev, SOFTMAX / "problem.py", fresh_native(work, "prime"), "build")
        result["prime_kb"] = evaluate(ev, SCALE_ADD, fresh_kb(work, "prime"), "build")
        result["prime_corpus_kit"] = evaluate(ev, SCALE_ADD, materialize(honest, work / "prime-kit"), "build")
    result["pch_builds"] = wait_for_pch()

    (out / "cold_path.json").write_text(json.dumps(result, indent=1))
    for b in result["pch_builds"]:
        print(f"precompiled header {b['key']}: {b.get('seconds', '-')} s one-time, {b.get('mb', '-')} MB, "
              f"for {b['preamble'].strip().replace(chr(10), ' ')}", flush=True)
    runs = Runs(result, out / "cold_path.json")
    # the planted hang first (benchmark mode with a cold Inductor cache: the baseline compiles first)
    for mode in ("test", "benchmark"):
        with Evaluator(SETTINGS, workdir=work / f"hang-{mode}") as ev:
            directory = materialize(hang, work / f"hang-{mode}-cand")
            runs[f"hang {mode}"] = evaluate(ev, SCALE_ADD, directory, mode)
            directory = materialize(honest, directory)
            runs[f"after the hang {mode}"] = evaluate(ev, SCALE_ADD, directory, mode)
    for mode in ("test", "benchmark"):
        cand = fresh_native(work, mode)
        with Evaluator(SETTINGS, workdir=work / f"native-{mode}", standby_builder=True) as ev:
            runs[f"native cold {mode}"] = evaluate(ev, SOFTMAX / "problem.py", cand, mode)
            kernel = cand / "softmax.cu"
            kernel.write_text(kernel.read_text() + "\n// an edit\n")
            runs[f"native warm edit {mode}"] = evaluate(ev, SOFTMAX / "problem.py", cand, mode)
    kb = fresh_kb(work, "test")
    with Evaluator(SETTINGS, workdir=work / "kb-test", standby_builder=True) as ev:
        runs["kernelbench cold test"] = evaluate(ev, SCALE_ADD, kb, "test")
        # another candidate with the same load_inline name, wrong on purpose, in the same warm worker:
        # its own build must run (incorrect), not the module already loaded under that name
        wrong = fresh_kb(work, "wrong")
        wrong.write_text(wrong.read_text().replace("alpha * x[i] + y[i]", "alpha * x[i] - y[i]"))
        runs["kernelbench same name, other code (expect incorrect)"] = evaluate(ev, SCALE_ADD, wrong, "test")
    with Evaluator(SETTINGS, workdir=work / "kb-again-test") as ev:
        runs["kernelbench again (new evaluator) test"] = evaluate(ev, SCALE_ADD, kb, "test")

    print(json.dumps(result["environment"]))
    print(HEADER)
    for name, r in runs.items():
        print(line(name, r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
