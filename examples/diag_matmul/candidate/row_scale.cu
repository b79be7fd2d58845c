// diag(a) @ B == a[:, None] * B: row r of the product is row r of B scaled by a[r], because
// (diag(a) @ B)[r, c] = sum_k diag(a)[r, k] * B[k, c] and only k = r is non-zero. That is one read
// and one write of B (O(N*M) bytes) instead of an O(N^2 * M) matrix multiply.
//
// In fp32 the two agree bit for bit on finite inputs (the matrix multiply adds exact zeros to
// a[r] * B[r, c]); they differ only where B holds inf or NaN, since 0 * inf = NaN in the product.
//
// One CTA per row; 16-byte accesses when the row length allows, 4 in flight per thread.
//
// Device code only: binding.cpp picks the kernel and launches it.
#include <cuda_runtime.h>
#include <stdint.h>

#include "row_scale.h"

constexpr int kUnroll = 4;

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
scale_rows_vec4(const float* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ out,
                int64_t vecs_per_row) {
  const int64_t row = blockIdx.x;
  const float scale = __ldg(a + row);
  const float4* src = b + row * vecs_per_row;
  float4* dst = out + row * vecs_per_row;
  for (int64_t base = threadIdx.x; base < vecs_per_row; base += kThreads * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i < vecs_per_row) v[u] = __ldcs(src + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kThreads;
      if (i < vecs_per_row) __stcs(dst + i, make_float4(v[u].x * scale, v[u].y * scale, v[u].z * scale, v[u].w * scale));
    }
  }
}

// Any row length or alignment: one float per access.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
scale_rows_scalar(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int64_t cols) {
  const int64_t row = blockIdx.x;
  const float scale = __ldg(a + row);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) out[row * cols + c] = b[row * cols + c] * scale;
}

// The instances binding.cpp launches: CTAs of 256 threads.
template __global__ void scale_rows_vec4<256>(const float*, const float4*, float4*, int64_t);
template __global__ void scale_rows_scalar<256>(const float*, const float*, float*, int64_t);
