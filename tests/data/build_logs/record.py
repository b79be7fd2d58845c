"""Re-record the build logs test_diagnostics.py parses, by running the real tools.

Usage: python tests/data/build_logs/record.py   (needs nvcc and torch; takes a few minutes: it builds
the test candidate once). The candidate is copied to /tmp/kp-fixtures/vector_scale so the logs hold
stable absolute paths.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root: kernelpilot importable
CANDIDATES = HERE.parent / "candidates"
WORK = Path("/tmp/kp-fixtures")
CAND = WORK / "vector_scale"


def run(argv: list[str], cwd: Path) -> str:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    return proc.stdout + proc.stderr


def build(name: str) -> None:
    """The raw output of the build step build_candidate runs (python -m kernelpilot.extension --build)."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernelpilot.extension", "--build", str(CAND), "--build-dir", str(WORK / "build")],
        capture_output=True, text=True, cwd=HERE.parents[2],
    )
    noise = ("NumPy", "_conversion_method_template", "No CUDA runtime is found")
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if not any(n in line for n in noise)]
    (HERE / name).write_text("\n".join(lines) + "\n")
    print(f"{name}: exit status {proc.returncode}")


def main() -> None:
    from kernelpilot.toolkit import find_cuda_home

    nvcc = str(find_cuda_home() / "bin" / "nvcc")
    shutil.rmtree(WORK, ignore_errors=True)
    shutil.copytree(CANDIDATES / "vector_scale", CAND)
    flags = ["-O3", "-lineinfo", "-Xptxas=-v", "-std=c++17", "-gencode=arch=compute_90,code=sm_90"]

    # ptxas figures of kernels that spill and use a local array
    shutil.copy(CANDIDATES / "variants" / "spill_kernel.cu", CAND / "spill_kernel.cu")
    (HERE / "ptxas_spills.txt").write_text(run([nvcc, *flags, "-c", str(CAND / "spill_kernel.cu"), "-o", "/dev/null"], CAND))
    (CAND / "spill_kernel.cu").unlink()

    # nvcc front-end warnings (with their source excerpts and the "Remark" line)
    (CAND / "warn.cu").write_text(
        "#include <cuda_runtime.h>\n\n__device__ int missing_return(int x) {\n    if (x > 0) return x;\n}\n\n"
        "__global__ void k(int* y) {\n    int unused_value = 3;\n    y[threadIdx.x] = missing_return(threadIdx.x);\n}\n"
    )
    (HERE / "nvcc_warnings.txt").write_text(run([nvcc, *flags, "-c", str(CAND / "warn.cu"), "-o", "/dev/null"], CAND))
    (CAND / "warn.cu").unlink()

    # the nvcc driver refuses a misspelt flag (what a bad extra_cuda_cflags gives)
    (HERE / "nvcc_driver_error.txt").write_text(run([nvcc, "--use-fast-maths", "-c", "kernel.cu", "-o", "/dev/null"], CAND))

    # ptxas error: too much static shared memory
    (CAND / "big_smem.cu").write_text(
        "__global__ void big_smem(float* y) {\n    __shared__ float t[20000];\n"
        "    t[threadIdx.x] = 1.f;\n    __syncthreads();\n    y[threadIdx.x] = t[threadIdx.x ^ 1];\n}\n"
    )
    (HERE / "ptxas_error.txt").write_text(run([nvcc, *flags, "-c", str(CAND / "big_smem.cu"), "-o", "/dev/null"], CAND))
    (CAND / "big_smem.cu").unlink()

    # host compiler errors and a warning
    (CAND / "glue.cpp").write_text(
        "#include <vector>\nint f(int x) {\n    int y\n    return x + y;\n}\n"
        "int g() { return undefined_fn(3); }\nint h(unsigned a, int b) { return a < b; }\n"
    )
    (HERE / "gcc_errors.txt").write_text(run(["c++", "-Wall", "-Wextra", "-c", str(CAND / "glue.cpp"), "-o", "/dev/null"], CAND))
    (CAND / "glue.cpp").unlink()

    # linker cannot find the CUDA runtime (what a wrong CUDA_HOME such as /usr/local gives)
    (CAND / "empty.cpp").write_text("int kp_empty() { return 0; }\n")
    run(["c++", "-fPIC", "-c", "empty.cpp", "-o", str(WORK / "empty.o")], CAND)
    (HERE / "ld_cannot_find.txt").write_text(
        run(["c++", str(WORK / "empty.o"), "-shared", "-L/usr/local/lib64", "-lcudart", "-o", str(WORK / "x.so")], CAND)
    )
    (CAND / "empty.cpp").unlink()

    # real ninja builds: cold, front-end error, link error, incremental
    build("ninja_cold_build.txt")
    shutil.copy(CANDIDATES / "variants" / "broken_kernel.cu", CAND / "kernel.cu")
    build("ninja_nvcc_error.txt")
    shutil.copy(CANDIDATES / "vector_scale" / "kernel.cu", CAND / "kernel.cu")
    shutil.copy(CANDIDATES / "variants" / "duplicate_launcher.cu", CAND / "duplicate_launcher.cu")
    build("ninja_link_error.txt")
    (CAND / "duplicate_launcher.cu").unlink()
    shutil.copy(CANDIDATES / "variants" / "missing_function.cu", CAND / "missing_function.cu")
    build("ninja_load_error.txt")
    (CAND / "missing_function.cu").unlink()
    shutil.copy(CANDIDATES / "variants" / "spill_kernel.cu", CAND / "spill_kernel.cu")
    build("ninja_incremental_spills.txt")


if __name__ == "__main__":
    main()
