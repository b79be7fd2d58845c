"""Edit -> rebuild -> import latency of a directory candidate (goal: edit -> verdict <= 5 s warm).

Builds a small candidate cold, then edits one line of its kernel.cu several times and measures each
path an edit takes:

- ``build step``: build_candidate (the engine's build subprocess: python + torch import + ninja),
- ``fresh import``: a new process imports model_new.py (ninja finds nothing to do) and runs it once,
- ``in-process reload``: a warm process (like the evaluation worker) calls load_extension again.

Run on the GPU machine:  .venv/bin/python benchmarks/edit_latency.py [--rounds 5] [--json]
Without a GPU the forward call is skipped and the table says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_CANDIDATE = ROOT / "tests" / "data" / "candidates" / "vector_scale"
EDIT_FROM = "y[i] = alpha * x[i];"

_FRESH_IMPORT = """
import importlib.util, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
spec = importlib.util.spec_from_file_location("kp_latency_model", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t2 = time.perf_counter()
ran = torch.cuda.is_available()
if ran:
    x = torch.randn(1 << 20, device="cuda")
    y = module.ModelNew(2.0)(x)
    torch.cuda.synchronize()
    assert torch.equal(y, 2.0 * x) or torch.allclose(y, 2.0 * x)
t3 = time.perf_counter()
print(f"{t1 - t0} {t2 - t1} {t3 - t2} {int(ran)}")
"""


def _environment() -> dict[str, str]:
    from kernelpilot.toolkit import detect_arch, find_cuda_home

    info = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
            "python": platform.python_version(), "arch": detect_arch()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    except ImportError:
        info["torch"] = "missing"
    home = find_cuda_home()
    nvcc = subprocess.run([str(home / "bin" / "nvcc"), "--version"], capture_output=True, text=True).stdout
    info["nvcc"] = nvcc.strip().splitlines()[-1] if nvcc.strip() else "?"
    info["cpus"] = str(__import__("os").cpu_count())
    return info


def _edit(kernel: Path, round_no: int) -> None:
    """Change one line: the scale expression, written a different (equivalent) way each round."""
    text = kernel.read_text()
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "y[i] =" in line:
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = f"{indent}y[i] = alpha * x[i];  // edit {round_no}\n"
            break
    else:
        raise SystemExit(f"{kernel} has no line with {EDIT_FROM!r} to edit")
    kernel.write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidate", type=Path, default=DEFAULT_CANDIDATE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON too")
    args = parser.parse_args(argv)

    from kernelpilot.evaluation.build.step import build_candidate, build_env
    from kernelpilot.evaluation.candidate import load_candidate
    from kernelpilot.extension import load_extension

    work = Path(tempfile.mkdtemp(prefix="kp-edit-latency-"))
    directory = work / "candidate"
    shutil.copytree(args.candidate, directory)
    build_dir = work / "build"
    candidate = load_candidate(directory)
    env = build_env(candidate, build_dir=build_dir)
    rows: dict[str, list[float]] = {}

    def fresh_import() -> tuple[float, float, float, bool]:
        out = subprocess.run([sys.executable, "-c", _FRESH_IMPORT, str(directory / "model_new.py")],
                             env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(out.stdout + out.stderr)
        torch_s, load_s, run_s, ran = out.stdout.split()[-4:]
        return float(torch_s), float(load_s), float(run_s), ran == "1"

    start = time.perf_counter()
    cold = build_candidate(candidate, build_dir=build_dir)
    if not cold.ok:
        raise SystemExit(f"cold build failed:\n{cold.log_tail}")
    rows["cold build step (subprocess)"] = [time.perf_counter() - start]
    t_torch, t_load, t_run, ran = fresh_import()
    rows["cold: fresh process import torch"] = [t_torch]
    rows["cold: fresh process load_extension (ninja no-op) + import"] = [t_load]

    # a warm process, as the evaluation worker is: torch imported, the extension loaded once
    import os

    os.environ.update({k: env[k] for k in ("KERNELPILOT_BUILD_DIR", "CUDA_HOME", "PATH", "TORCH_CUDA_ARCH_LIST")})
    load_extension(directory / "model_new.py")

    kernel = directory / "kernel.cu"
    for r in range(args.rounds):
        _edit(kernel, r)
        report = build_candidate(load_candidate(directory), build_dir=build_dir)
        if not report.ok or report.rebuilt != ["kernel.cu"]:
            raise SystemExit(f"edit {r}: expected only kernel.cu rebuilt, got {report.rebuilt} ok={report.ok}\n{report.log_tail}")
        rows.setdefault("edit: build step (subprocess, rebuilds kernel.cu)", []).append(report.seconds)
        t_torch, t_load, t_run, ran = fresh_import()
        rows.setdefault("edit: fresh process load_extension + import", []).append(t_load)
        rows.setdefault("edit: fresh process first forward" + ("" if ran else " (no GPU: skipped)"), []).append(t_run)
        _edit(kernel, 1000 + r)
        t0 = time.perf_counter()
        load_extension(directory / "model_new.py")  # rebuild + reload in this (warm) process
        rows.setdefault("edit: in-process rebuild + reload (warm worker)", []).append(time.perf_counter() - t0)

    info = _environment()
    print(f"# Edit latency: {info['date']}, {info['gpu']}, torch {info['torch']}, {info['nvcc']}, "
          f"{info['cpus']} CPUs, arch {info['arch']}")
    print()
    print("| step | median s | min s | max s | n |")
    print("|---|---|---|---|---|")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | {len(values)} |")
    edit_path = statistics.median(rows["edit: build step (subprocess, rebuilds kernel.cu)"])
    print()
    print(f"edit -> rebuilt and importable (build step + fresh import): "
          f"{edit_path + statistics.median(rows['edit: fresh process load_extension + import']):.2f} s "
          "(goal for the whole edit -> verdict: <= 5 s warm)")
    if args.json:
        print(json.dumps({"environment": info, "seconds": rows}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
