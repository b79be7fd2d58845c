"""A comment-only save of a header binding.cpp shares with the kernels, then a code save of it, timed as the pairing
UI evaluates them (one Evaluator with its standby builder, test mode): the first keeps the device-only build
(native/code_text.py), the second takes the full build.

    python benchmarks/shared_header_edit.py --out OUT [--examples cross_entropy,diag_matmul]

Per example (a fresh copy): the cold verdict, a kernel edit, the shared header's comment changed (with a kernel
edit, so device code compiles), a declaration added to that header. Writes OUT/shared-header.json, prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from device_edits import kernel_file, record, unroll_edit  # noqa: E402
from edit_loop import copy_example  # noqa: E402


def shared_header(candidate: Path) -> Path:
    """The first header binding.cpp includes from the candidate's folder."""
    from kernelpilot.native.sources import local_includes

    return local_includes(candidate / "binding.cpp", candidate)[0]


def measure(name: str, work: Path) -> dict[str, Any]:
    from kernelpilot.config import load_config
    from kernelpilot.evaluation import EvalSettings, Evaluator

    example = copy_example(name, work, False)
    problem, candidate = example / "problem.py", example / "candidate"
    config = load_config(example, overrides={"problem": str(problem)}, env={})
    settings = EvalSettings.from_config(config, device="cuda", build_timeout_s=600.0)
    cu, header = kernel_file(candidate), shared_header(candidate)
    original, header_text = cu.read_text(), header.read_text()
    rows: list[dict[str, Any]] = []
    with Evaluator(settings, workdir=work / f"eval-{name}", standby_builder=True) as ev:
        def run(what: str) -> None:
            t0 = time.monotonic()
            v = ev.evaluate(problem, candidate, "test")
            rows.append(record(v, time.monotonic() - t0, what))
            print(f"  {name} {what}: {rows[-1]['status']} {rows[-1]['wall_s']} s; {rows[-1]['command'][:70]}",
                  flush=True)
            time.sleep(1.0)  # as a person reads the verdict

        run("cold")
        cu.write_text(unroll_edit(original, 1))
        run("kernel edit")
        header.write_text(header_text.replace("//", "// (edited)", 1) + "// a comment appended\n")
        cu.write_text(unroll_edit(original, 2))
        run(f"{header.name}: comments, with a kernel edit")
        header.write_text(header_text + "long kp_declared_only();\n")
        run(f"{header.name}: a declaration added")
    return {"example": name, "header": header.name, "runs": rows}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--examples", default="cross_entropy,diag_matmul")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import tempfile

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.examples.split(","):
            results.append(measure(name, Path(tmp)))
            (args.out / "shared-header.json").write_text(json.dumps(results, indent=1))
    print(f"{'example':16} {'edit':44} {'status':10} {'wall s':>7} {'build s':>8}  path")
    for res in results:
        for r in res["runs"]:
            path = "device only" if r["command"].startswith("device code only") else "full"
            print(f"{res['example']:16} {r['edit'][:44]:44} {r['status']:10} {r['wall_s']:7.2f} "
                  f"{(r['build_s'] or 0):8.2f}  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
