// The kernels of linear_sum.cu as binding.cpp launches them (both include these declarations).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

// Column pass: a CTA is kColVecs column vectors (128 columns) x kRowLanes row lanes.
constexpr int kColVecs = 32;
constexpr int kRowLanes = 8;
// GEMV: kDotThreads threads, one warp per row of x.
constexpr int kDotThreads = 256;

// partial[split, c] = sum of w[r, c] over the rows r of band `split` = blockIdx.y (rows_per_split rows each);
// grid.x covers the vecs_per_row float4 columns, kColVecs per CTA.
__global__ void column_partials(const float4* __restrict__ w, float4* __restrict__ partial, int64_t rows,
                                int64_t vecs_per_row, int64_t rows_per_split);

// v[c] = factor * sum over splits of partial[split, c]; CTAs of 256 threads, 32 columns each.
__global__ void fold_partials(const float* __restrict__ partial, float* __restrict__ v, int64_t cols, int splits,
                              float factor);

// out[row] = x[row, :] . v for one row per warp (kDotThreads / 32 rows per CTA).
__global__ void row_dot(const float4* __restrict__ x, const float4* __restrict__ v, float* __restrict__ out,
                        int64_t rows, int64_t vecs_per_row);
