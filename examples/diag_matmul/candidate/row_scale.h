// The kernels of row_scale.cu as binding.cpp launches them (both include these declarations).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

// out[r, :] = a[r] * b[r, :] for r = blockIdx.x, one CTA of kThreads threads per row, with 16-byte accesses: b and
// out 16-byte aligned, rows of vecs_per_row float4.
template <int kThreads>
__global__ void scale_rows_vec4(const float* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ out,
                                int64_t vecs_per_row);

// The same for any row length or alignment: one float per access.
template <int kThreads>
__global__ void scale_rows_scalar(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                  int64_t cols);
