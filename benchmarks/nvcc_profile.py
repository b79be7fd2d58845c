"""Where a KernelBench single-file candidate's CUDA side spends its build time (issue 14).

    python3 benchmarks/nvcc_profile.py OUTDIR

Takes the CUDA source of benchmarks/data/kb_scale_add.py as ``load_inline`` writes it (its three
header lines, then the candidate's ``cuda_sources``), compiles it with the flags torch's extension
builder passes to nvcc for this GPU, under ``nvcc --time``, and writes OUTDIR/nvcc_time.csv and
OUTDIR/nvcc_profile.json: seconds per nvcc phase (the two preprocessings, cudafe++, cicc, ptxas,
the host compile) and the wall time. Prints the phase table last.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CANDIDATE = ROOT / "benchmarks" / "data" / "kb_scale_add.py"


def cuda_source() -> str:
    """The candidate's cuda_sources string (a module-level constant), with load_inline's own prologue."""
    tree = ast.parse(CANDIDATE.read_text())
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
              for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value.value, str)}
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline")
    arg = next(k.value for k in call.keywords if k.arg == "cuda_sources")
    body = consts[arg.id] if isinstance(arg, ast.Name) else ast.literal_eval(arg)
    return "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + body


def nvcc_command(src: Path, obj: Path) -> list[str]:
    import inspect

    import torch.utils.cpp_extension as ce

    from kernelpilot.toolkit import detect_arch, find_cuda_home, gencode_flags

    try:
        includes = ce.include_paths(device_type="cuda")
    except TypeError:  # older torch
        includes = ce.include_paths(cuda=True)
    std = "-std=c++20" if "-std=c++20" in inspect.getsource(ce) else "-std=c++17"
    flags = ["-DTORCH_EXTENSION_NAME=scale_add", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for d in [*includes, sysconfig.get_paths()["include"]]:
        flags += ["-isystem", d]
    flags += [*ce.COMMON_NVCC_FLAGS, *gencode_flags(detect_arch()), "--compiler-options", "-fPIC", std]
    return [str(find_cuda_home() / "bin" / "nvcc"), *flags, "-c", str(src), "-o", str(obj)]


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "nvcc-profile-out")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kp-nvcc-"))
    src = work / "cuda.cu"
    src.write_text(cuda_source())
    cmd = nvcc_command(src, work / "cuda.o") + ["--time", str(out / "nvcc_time.csv")]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    wall = time.monotonic() - t0
    phases: dict[str, float] = {}
    if (out / "nvcc_time.csv").is_file():
        with open(out / "nvcc_time.csv") as f:
            for row in csv.reader(f):
                if len(row) >= 8 and row[7].strip() == "ms":
                    name = row[1].strip()
                    phases[name] = round(phases.get(name, 0.0) + float(row[6]) / 1000, 2)
    result = {"command": cmd, "returncode": r.returncode, "stderr": r.stderr[-2000:], "wall_s": round(wall, 2),
              "phases_s": phases, "cpus": os.cpu_count()}
    (out / "nvcc_profile.json").write_text(json.dumps(result, indent=1))
    for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"{name:28} {seconds:7.2f} s")
    print(f"{'wall (nvcc, one process)':28} {wall:7.2f} s   exit {r.returncode}")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
