#!/usr/bin/env python3
"""Write the scripted agent sessions examples/softmax/replay.jsonl and examples/rmsnorm/replay.jsonl.

Each session reads the problem and a skill, writes a naive kernel that fails to build, fixes it,
tests it (correct but slow), benchmarks and profiles it, then writes the optimised kernel, whose
files are exactly the reference candidate in examples/<op>/candidate/, benchmarks and proposes it.
The verdicts are real: `kernelpilot examples/<op> --replay examples/<op>/replay.jsonl` runs every
tool call through the evaluation engine. Rerun this script after editing a reference candidate
(tests/test_examples.py checks that the replays are up to date).
"""

from __future__ import annotations

import json
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


NAIVE_SOFTMAX_H = r'''// The kernel of softmax.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// y[r, :] = softmax(x[r, :]) for r = blockIdx.x, one CTA of kThreads threads per row.
template <int kThreads>
__global__ void softmax_rows(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n_cols);
'''

NAIVE_SOFTMAX = r'''// First version: one CTA per row, three passes over the row in global memory (max, sum, write).
// Device code only: binding.cpp launches the kernel (kernelpilot/launch.h).
#include "softmax.h"

namespace {

__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return p[i]; }

// Block-wide reduction through shared memory; op is max (is_max) or sum.
template <int kThreads>
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* scratch) {
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

}  // namespace

template <int kThreads>
__global__ void __launch_bounds__(kThreads) softmax_rows(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n_cols) {
  __shared__ float scratch[kThreads];
  const __nv_bfloat16* row = x + blockIdx.x * n_cols;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) m = fmaxf(m, load(row, i));
  m = block_reduce<kThreads>(m, true, scratch);
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) s += expf(load(row, i) - m);
  s = block_reduce<kThreads>(s, false, scratch);
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    y[blockIdx.x * n_cols + i] = __float2bfloat16(expf(load(row, i) - m) / s);
  }
}

template __global__ void softmax_rows<256>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
'''

NAIVE_SOFTMAX_BINDING = r'''// Python binding of softmax.cu (first version): checks the tensor, launches one CTA per row on the current
// stream. Host code only: kernels are launched through kernelpilot/launch.h, so an edit of softmax.cu
// recompiles device code alone.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>  // PYBIND11_MODULE and the at::Tensor <-> torch.Tensor caster

#include <kernelpilot/launch.h>

#include "softmax.h"

namespace {

constexpr int kThreads = 256;  // softmax.cu instantiates the kernel for this CTA size

at::Tensor softmax_last_dim(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kBFloat16, "softmax: x must be a bfloat16 CUDA tensor");
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous(), "softmax: x must be contiguous with at least one dimension");
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  const int64_t n_cols = x.size(-1);
  TORCH_CHECK(x.numel() / n_cols <= 0x7fffffff, "softmax: too many rows");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const kp::Config c{dim3(static_cast<unsigned>(x.numel() / n_cols)), dim3(kThreads), 0,
                     c10::cuda::getCurrentCUDAStream()};
  const cudaError_t status = kp::launch(c, softmax_rows<kThreads>, static_cast<const __nv_bfloat16*>(x.data_ptr()),
                                        static_cast<__nv_bfloat16*>(y.data_ptr()), n_cols);
  TORCH_CHECK(status == cudaSuccess, "softmax: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("softmax", &softmax_last_dim, "softmax over the last dimension (bf16 in/out, fp32 math)");
}
'''

NAIVE_RMSNORM_H = r'''// The kernel of rmsnorm.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w for r = blockIdx.x, one CTA of kThreads threads per row.
template <int kThreads>
__global__ void rmsnorm_rows(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t n_cols,
                             float eps);
'''

NAIVE_RMSNORM = r'''// First version: one CTA per row, two passes over the row in global memory, one bf16 per access.
// Device code only: binding.cpp launches the kernel (kernelpilot/launch.h).
#include "rmsnorm.h"

namespace {

template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* warp_sums) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

}  // namespace

template <int kThreads>
__global__ void __launch_bounds__(kThreads) rmsnorm_rows(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                         __nv_bfloat16* y, int64_t n_cols, float eps) {
  __shared__ float warp_sums[kThreads / 32];
  const int64_t base = blockIdx.x * n_cols;
  float sum_sq = 0.f;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    const float v = __bfloat162float(x[base + i]);
    sum_sq += v * v;
  }
  const float rstd = rsqrtf(block_sum<kThreads>(sum_sq, warp_sums) / n_cols + eps);
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    const float v = __bfloat162float(x[base + i]) * rstd * __bfloat162float(w[i]);
    y[base + i] = __float2bfloat16(v);
  }
}

template __global__ void rmsnorm_rows<256>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int64_t, float);
'''

NAIVE_RMSNORM_BINDING = r'''// Python binding of rmsnorm.cu (first version): checks the tensors, launches one CTA per row on the current
// stream. Host code only: kernels are launched through kernelpilot/launch.h, so an edit of rmsnorm.cu
// recompiles device code alone.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <kernelpilot/launch.h>

#include "rmsnorm.h"

namespace {

constexpr int kThreads = 256;  // rmsnorm.cu instantiates the kernel for this CTA size

torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && x.device() == weight.device(),
              "rmsnorm: x and weight must be CUDA tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16,
              "rmsnorm: x and weight must be bfloat16");
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous() && weight.is_contiguous(), "rmsnorm: tensors must be contiguous");
  const int64_t n_cols = x.size(-1);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n_cols, "rmsnorm: weight must have shape [", n_cols, "]");
  torch::Tensor y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  TORCH_CHECK(x.numel() / n_cols <= 0x7fffffff, "rmsnorm: too many rows");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const kp::Config c{dim3(static_cast<unsigned>(x.numel() / n_cols)), dim3(kThreads), 0,
                     c10::cuda::getCurrentCUDAStream()};
  const cudaError_t status = kp::launch(c, rmsnorm_rows<kThreads>, static_cast<const __nv_bfloat16*>(x.data_ptr()),
                                        static_cast<const __nv_bfloat16*>(weight.data_ptr()),
                                        static_cast<__nv_bfloat16*>(y.data_ptr()), n_cols, static_cast<float>(eps));
  TORCH_CHECK(status == cudaSuccess, "rmsnorm: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rmsnorm", &rmsnorm, "RMSNorm over the last dimension with a weight (bf16 in/out, fp32 math)");
}
'''


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
            "and write as three passes over global memory. softmax.cu holds device code only (the kernel), "
            "softmax.h declares it, and binding.cpp checks the tensor and launches it through "
            "kernelpilot/launch.h, so every later edit of the kernel builds in about a second.",
            call("write_file", path=f"{CAND}/softmax.h", content=NAIVE_SOFTMAX_H),
            call("write_file", path=f"{CAND}/softmax.cu", content=NAIVE_SOFTMAX),
            call("write_file", path=f"{CAND}/binding.cpp", content=NAIVE_SOFTMAX_BINDING),
            *write_reference("softmax", "model_new.py"),
        ),
        turn("Build it.", call("build")),
        turn(
            "PyTorch's build defines __CUDA_NO_BFLOAT16_CONVERSIONS__, so bf16 does not convert to float "
            "implicitly. Use the intrinsic.",
            call("edit_file", path=f"{CAND}/softmax.cu",
                 search="return p[i]; }", replace="return __bfloat162float(p[i]); }"),
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
            "registers so at least 1024 threads stay resident per SM.\n"
            "The kernel becomes a template over those shapes: softmax.cu instantiates each shape explicitly "
            "(device code only, row_reduce.cuh), binding.cpp picks the shape and row_launch.h launches it. "
            "The host side changes too, so this build is a full one.",
            *write_reference("softmax", "row_reduce.cuh", "row_launch.h", "softmax.h", "softmax.cu", "binding.cpp"),
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
            "A first, simple kernel: one CTA per row, sum of squares, then scale and write. The kernel "
            "lives in rmsnorm.cu (device code only), its declaration in rmsnorm.h, the checks and the launch "
            "in binding.cpp (through kernelpilot/launch.h), so kernel edits build in about a second.",
            call("write_file", path=f"{CAND}/rmsnorm.h", content=NAIVE_RMSNORM_H),
            call("write_file", path=f"{CAND}/rmsnorm.cu", content=NAIVE_RMSNORM),
            call("write_file", path=f"{CAND}/binding.cpp", content=NAIVE_RMSNORM_BINDING),
            *write_reference("rmsnorm", "model_new.py"),
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
            "- launch shapes by N, capped at 64 registers: rmsnorm.cu instantiates each shape explicitly, "
            "binding.cpp picks it and row_launch.h launches it (a full build, since the host side changes).",
            *write_reference("rmsnorm", "row_reduce.cuh", "row_launch.h", "rmsnorm.h", "rmsnorm.cu", "binding.cpp"),
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
