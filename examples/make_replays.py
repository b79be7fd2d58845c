#!/usr/bin/env python3
"""Write the scripted agent sessions examples/softmax/replay.jsonl and examples/rmsnorm/replay.jsonl.

Each session reads the problem and a skill, writes a naive kernel that fails to build, fixes it,
tests it (correct but slow), benchmarks and profiles it, then writes the optimised kernel, whose
files are exactly the reference candidate in examples/<op>/candidate/, benchmarks and proposes it.
The naive kernel is built with the reference binding.cpp and model_new.py, so its extern "C" launchers
are generated from the binding's declarations: it defines every symbol the binding calls (the replay
would otherwise show an "undefined symbol" build error where its text says "Correct").
The verdicts are real: `kernelpilot examples/<op> --replay examples/<op>/replay.jsonl` runs every
tool call through the evaluation engine. Rerun this script after editing a reference candidate
(tests/test_examples.py checks that the replays are up to date).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent
CAND = "${candidate_dir}"  # the session's candidate directory, substituted by the scripted client


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def turn(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "tool_calls": list(calls)}


def reference(op: str, name: str) -> str:
    return (EXAMPLES / op / "candidate" / name).read_text()


def write_reference(op: str, *names: str) -> list[dict[str, Any]]:
    return [call("write_file", path=f"{CAND}/{n}", content=reference(op, n)) for n in names]


# The naive kernels are templates over the element type; their extern "C" launchers are not written here
# but generated from the reference binding.cpp's declarations (``launchers``), so the naive kernel defines
# every symbol the binding it is built with calls (an fp32 one as well as the bf16 one), with the same
# signatures. `launch<T>(...)` takes the binding's parameters in the binding's order.
NAIVE_SOFTMAX = r"""// First version: one CTA per row, three passes over the row in global memory (max, sum, write).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__device__ float load(const __nv_bfloat16* p, int64_t i) { return p[i]; }
__device__ float load(const float* p, int64_t i) { return p[i]; }
__device__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16(v); }
__device__ void store(float* p, int64_t i, float v) { p[i] = v; }

// Block-wide reduction through shared memory; op is max (is_max) or sum.
__device__ float block_reduce(float v, bool is_max, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = scratch[threadIdx.x + stride];
      scratch[threadIdx.x] = is_max ? fmaxf(scratch[threadIdx.x], other) : scratch[threadIdx.x] + other;
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();
  return result;
}

template <class T>
__global__ void softmax_rows(const T* x, T* y, int64_t n_cols) {
  __shared__ float scratch[kThreads];
  const T* row = x + blockIdx.x * n_cols;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) m = fmaxf(m, load(row, i));
  m = block_reduce(m, true, scratch);
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) s += expf(load(row, i) - m);
  s = block_reduce(s, false, scratch);
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) store(y + blockIdx.x * n_cols, i, expf(load(row, i) - m) / s);
}

template <class T>
cudaError_t launch(const void* x, void* y, int64_t rows, int64_t n_cols, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  softmax_rows<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                         n_cols);
  return cudaGetLastError();
}

}  // namespace
"""

NAIVE_RMSNORM = r"""// First version: one CTA per row, two passes over the row in global memory, one element per access.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float to_float(float v) { return v; }
template <class T>
__device__ T from_float(float v);
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <>
__device__ float from_float<float>(float v) { return v; }

__device__ float block_sum(float v, float* warp_sums) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

template <class T>
__global__ void rmsnorm_rows(const T* x, const T* w, T* y, int64_t n_cols, float eps) {
  __shared__ float warp_sums[kThreads / 32];
  const int64_t base = blockIdx.x * n_cols;
  float sum_sq = 0.f;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    const float v = to_float(x[base + i]);
    sum_sq += v * v;
  }
  const float rstd = rsqrtf(block_sum(sum_sq, warp_sums) / n_cols + eps);
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    y[base + i] = from_float<T>(to_float(x[base + i]) * rstd * to_float(w[i]));
  }
}

template <class T>
cudaError_t launch(const void* x, const void* weight, void* y, int64_t rows, int64_t n_cols, float eps,
                   cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  rmsnorm_rows<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<T*>(y), n_cols, eps);
  return cudaGetLastError();
}

}  // namespace
"""

DECLARATION = re.compile(r'extern\s+"C"\s+cudaError_t\s+(\w+)\s*\(([^)]*)\)\s*;')
ELEMENT_TYPES = {"bf16": "__nv_bfloat16", "f32": "float"}  # a launcher's name ends with its element type


def launchers(op: str) -> str:
    """The extern "C" launchers the reference binding.cpp declares, each calling the naive ``launch<T>``
    with the declared parameters: every symbol the binding needs is defined, with its exact signature."""
    binding = reference(op, "binding.cpp")
    found = DECLARATION.findall(binding)
    if not found:
        raise SystemExit(f"examples/{op}/candidate/binding.cpp declares no extern \"C\" cudaError_t launcher; "
                         "update make_replays.py to the new candidate layout.")
    out = []
    for name, params in found:
        suffix = name.rsplit("_", 1)[-1]
        if suffix not in ELEMENT_TYPES:
            raise SystemExit(f"examples/{op}/candidate/binding.cpp declares {name}, whose element type "
                             f"(_{'|_'.join(ELEMENT_TYPES)}) make_replays.py cannot tell; add it to ELEMENT_TYPES.")
        args = [re.split(r"[\s*&]+", p.strip())[-1] for p in params.split(",")]
        signature = " ".join(params.split())
        out.append(f'extern "C" cudaError_t {name}({signature}) {{\n'
                   f"  return launch<{ELEMENT_TYPES[suffix]}>({', '.join(args)});\n}}\n")
    return "\n" + "\n".join(out)


def naive(op: str, kernel: str) -> str:
    """The naive kernel with the launchers its binding needs."""
    text = kernel + launchers(op)
    missing = [n for n, _ in DECLARATION.findall(reference(op, "binding.cpp")) if f"cudaError_t {n}(" not in text]
    assert not missing, missing
    return text


def softmax_session() -> list[dict[str, Any]]:
    return [
        turn("I'll start with the problem: shapes, dtypes and the bytes it has to move.", call("show_problem")),
        turn(
            "A row softmax over bf16: every element is read once and written once at best, so this is "
            "memory-bound and the floor is bytes / copy bandwidth (about 0.5 ms for 1 GiB in and 1 GiB out "
            "at 4.25 TB/s). Let me read the skill on row reductions before writing anything.",
            call("read_skill", name="reductions-softmax-norms"),
        ),
        turn(
            "First a simple version to get correctness and the plumbing right: one CTA per row, max, sum "
            "and write as three passes over global memory. The binding and model_new.py are the final "
            "ones; only the kernel will change.",
            call("write_file", path=f"{CAND}/softmax.cu", content=naive("softmax", NAIVE_SOFTMAX)),
            *write_reference("softmax", "binding.cpp", "model_new.py"),
        ),
        turn("Build it.", call("build")),
        turn(
            "PyTorch's build defines __CUDA_NO_BFLOAT16_CONVERSIONS__, so bf16 does not convert to float "
            "implicitly. Use the intrinsic.",
            call("edit_file", path=f"{CAND}/softmax.cu", search="const __nv_bfloat16* p, int64_t i) { return p[i]; }",
                 replace="const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }"),
        ),
        turn("Now check correctness.", call("test")),
        turn("Correct. Time it against eager and torch.compile.", call("benchmark")),
        turn(
            "Correct but far from the floor. Before changing anything, let me see where the time goes.",
            call("profile"),
        ),
        turn(
            "The naive kernel reads each row three times with 2-byte loads and runs two shared-memory "
            "tree reductions. The plan, predicted to reach about 90% of the copy ceiling:\n"
            "1. load the row once into registers as 16-byte vectors, every load of a thread in flight "
            "before the first use, and write it once from the same registers;\n"
            "2. one online reduction: each thread computes (max, sum of exp(x - max)) of its elements, "
            "pairs merge through shuffles, one shared slot per warp, and, for rows over 16K, a "
            "thread-block cluster exchanging one slot per CTA through distributed shared memory;\n"
            "3. exp as ex2.approx of one FFMA with log2(e) folded in;\n"
            "4. launch shapes by N (threads per CTA, vectors per thread, cluster size) capped at 64 "
            "registers so at least 1024 threads stay resident per SM.",
            *write_reference("softmax", "row_reduce.cuh", "softmax.cu"),
        ),
        turn("Build first, to read the register and spill report for every shape.", call("build")),
        turn("No spills and at most 64 registers. Benchmark it.", call("benchmark")),
        turn(
            "This is the version to keep. Proposing it.",
            call("propose", summary=(
                "One-pass row softmax: each row is read once into registers (16-byte vectors, all loads in "
                "flight), one online (max, sum) all-reduce through shuffles, shared memory and, above 16K "
                "columns, a DSMEM cluster exchange; written once. Shapes by N keep <= 64 registers and no "
                "spills. Faster than torch.compile because it moves the minimum bytes: one read and one "
                "write per element.")),
        ),
    ]


def rmsnorm_session() -> list[dict[str, Any]]:
    return [
        turn("Reading the problem first.", call("show_problem")),
        turn(
            "RMSNorm with a weight, bf16 in and out: one read and one write per element is the floor, so "
            "this is about bandwidth. Let me see what torch.compile generates, since that is the bar.",
            call("inductor_kernel"),
        ),
        turn("And the skill on memory-bound kernels.", call("read_skill", name="memory-bound-kernels")),
        turn(
            "A first, simple kernel: one CTA per row, sum of squares, then scale and write.",
            call("write_file", path=f"{CAND}/rmsnorm.cu", content=naive("rmsnorm", NAIVE_RMSNORM)),
            *write_reference("rmsnorm", "binding.cpp", "model_new.py"),
        ),
        turn("Build.", call("build")),
        turn(
            "The non-_sync shuffles are gone from CUDA; __shfl_down_sync with a full mask is the "
            "replacement.",
            call("edit_file", path=f"{CAND}/rmsnorm.cu",
                 search="v += __shfl_down(v, offset);", replace="v += __shfl_down_sync(0xffffffffu, v, offset);"),
        ),
        turn("Test correctness.", call("test")),
        turn("Correct. Benchmark.", call("benchmark")),
        turn("Slow, as expected from 2-byte loads and two passes. Profile to confirm.", call("profile")),
        turn(
            "Rewrite, predicted to reach about 90% of the copy ceiling at every N:\n"
            "- the row is loaded once into registers in 16-byte vectors (all loads in flight), the sum "
            "of squares is all-reduced once (shuffles, one shared slot per warp, and a cluster of CTAs "
            "through distributed shared memory for rows over 16K), and the row is scaled and written "
            "from registers: one read and one write per element;\n"
            "- the weight is read after the reduction, from L2, so it holds no registers while the row "
            "loads are in flight;\n"
            "- launch shapes by N, capped at 64 registers.",
            *write_reference("rmsnorm", "row_reduce.cuh", "rmsnorm.cu"),
        ),
        turn("Build and check the register report.", call("build")),
        turn("Benchmark the new version.", call("benchmark")),
        turn(
            "Proposing it.",
            call("propose", summary=(
                "One-pass RMSNorm: the row is read once into registers as 16-byte vectors, its sum of "
                "squares all-reduced once (warp shuffles, shared memory, DSMEM across a cluster for rows "
                "over 16K), the weight read afterwards from L2, and the row written once. <= 64 registers, "
                "no spills. It moves the minimum bytes at every N, where torch.compile re-reads long rows.")),
        ),
    ]


def main() -> None:
    for op, session in (("softmax", softmax_session()), ("rmsnorm", rmsnorm_session())):
        path = EXAMPLES / op / "replay.jsonl"
        path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in session))
        print(f"wrote {path} ({len(session)} turns)")


if __name__ == "__main__":
    main()
