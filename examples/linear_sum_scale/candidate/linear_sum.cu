// sum_j ((x @ W.T) / 2)[b, j] * s  ==  x[b, :] . v   with   v = (s / 2) * sum_j W[j, :]
//
// Summing the GEMM's outputs over j commutes with the product (it is linear in W), and the scalar
// factors fold into v. So the GEMM (batch x out x in multiply-adds) becomes one pass over W to
// build v (a column sum) and one pass over x (a GEMV): both memory-bound, O(bytes) work.
//
// Three launches, all deterministic (fixed summation order, no atomics):
//   1. column_partials: W [out, in] -> partial [splits, in], each CTA sums a band of W's rows
//      for 128 columns (16-byte loads, 4 rows in flight per thread, a shared-memory fold);
//   2. fold_partials:   partial -> v [in], times s / 2;
//   3. row_dot:         one warp per row of x, 16-byte loads, v from L1/L2, warp-shuffle sum.
//
// Device code only: binding.cpp sizes the bands and grids and launches the three kernels.
#include <cuda_runtime.h>
#include <stdint.h>

#include "linear_sum.h"

// Column pass: a CTA is kColVecs column vectors x kRowLanes row lanes (binding.cpp launches 32 x 8: 128 columns);
// a warp reads 512 contiguous bytes of one row of W; each thread keeps kRowUnroll rows in flight.
constexpr int kRowUnroll = 4;
// GEMV: kDotThreads threads (256: 8 warps = 8 rows of x per CTA).
constexpr int kDotUnroll = 4;  // float4 loads of x in flight per lane

namespace {

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

}  // namespace

// partial[split, c] = sum of w[r, c] over the rows r of band `split` (blockIdx.y).
template <int kColVecs, int kRowLanes>
__global__ void __launch_bounds__(kColVecs * kRowLanes)
column_partials(const float4* __restrict__ w, float4* __restrict__ partial, int64_t rows, int64_t vecs_per_row,
                int64_t rows_per_split) {
  __shared__ float4 lane_sums[kRowLanes][kColVecs];
  const int tx = threadIdx.x % kColVecs, ty = threadIdx.x / kColVecs;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColVecs) + tx;  // in float4
  const int64_t first = blockIdx.y * rows_per_split;
  const int64_t last = min(rows, first + rows_per_split);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (col < vecs_per_row) {
    for (int64_t r = first + ty; r < last; r += kRowLanes * kRowUnroll) {
      float4 v[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t ru = r + u * kRowLanes;
        v[u] = ru < last ? __ldcs(w + ru * vecs_per_row + col) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) acc = add4(acc, v[u]);
    }
  }
  lane_sums[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && col < vecs_per_row) {
#pragma unroll
    for (int l = 1; l < kRowLanes; ++l) acc = add4(acc, lane_sums[l][tx]);
    partial[blockIdx.y * vecs_per_row + col] = acc;
  }
}

// v[c] = factor * sum over splits of partial[split, c]; a CTA is kColumns columns x kLanes split lanes.
template <int kColumns, int kLanes>
__global__ void __launch_bounds__(kColumns * kLanes)
fold_partials(const float* __restrict__ partial, float* __restrict__ v, int64_t cols, int splits, float factor) {
  __shared__ float lane_sums[kLanes][kColumns];
  const int tx = threadIdx.x % kColumns, ty = threadIdx.x / kColumns;
  const int64_t c = blockIdx.x * static_cast<long long>(kColumns) + tx;
  float sum = 0.f;
  if (c < cols) {
    for (int s = ty; s < splits; s += kLanes) sum += partial[s * cols + c];
  }
  lane_sums[ty][tx] = sum;
  __syncthreads();
  if (ty == 0 && c < cols) {
#pragma unroll
    for (int l = 1; l < kLanes; ++l) sum += lane_sums[l][tx];
    v[c] = sum * factor;
  }
}

template <int kDotThreads>
__global__ void __launch_bounds__(kDotThreads)
row_dot(const float4* __restrict__ x, const float4* __restrict__ v, float* __restrict__ out, int64_t rows,
        int64_t vecs_per_row) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kDotThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together
  const float4* src = x + row * vecs_per_row;
  float sum = 0.f;
  for (int64_t base = lane; base < vecs_per_row; base += 32 * kDotUnroll) {
    float4 xv[kDotUnroll];
#pragma unroll
    for (int u = 0; u < kDotUnroll; ++u) {
      const int64_t i = base + u * 32;
      xv[u] = i < vecs_per_row ? __ldcs(src + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kDotUnroll; ++u) {
      const int64_t i = base + u * 32;
      if (i < vecs_per_row) {
        const float4 vv = __ldg(v + i);
        sum = fmaf(xv[u].x, vv.x, sum);
        sum = fmaf(xv[u].y, vv.y, sum);
        sum = fmaf(xv[u].z, vv.z, sum);
        sum = fmaf(xv[u].w, vv.w, sum);
      }
    }
  }
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, mask);
  if (lane == 0) out[row] = sum;
}

// The instances binding.cpp launches.
template __global__ void column_partials<32, 8>(const float4*, float4*, int64_t, int64_t, int64_t);
template __global__ void fold_partials<32, 8>(const float*, float*, int64_t, int, float);
template __global__ void row_dot<256>(const float4*, const float4*, float*, int64_t, int64_t);
