// The kernels of linear_sum.cu as binding.cpp launches them (both include these declarations).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

// partial[split, c] = sum of w[r, c] over the rows r of band `split` = blockIdx.y (rows_per_split rows each); a CTA
// is kColVecs column vectors x kRowLanes row lanes, grid.x covers the vecs_per_row float4 columns.
template <int kColVecs, int kRowLanes>
__global__ void column_partials(const float4* __restrict__ w, float4* __restrict__ partial, int64_t rows,
                                int64_t vecs_per_row, int64_t rows_per_split);

// v[c] = factor * sum over splits of partial[split, c]; a CTA is kColumns columns x kLanes split lanes.
template <int kColumns, int kLanes>
__global__ void fold_partials(const float* __restrict__ partial, float* __restrict__ v, int64_t cols, int splits,
                              float factor);

// out[row] = x[row, :] . v, one warp per row (kDotThreads / 32 rows per CTA).
template <int kDotThreads>
__global__ void row_dot(const float4* __restrict__ x, const float4* __restrict__ v, float* __restrict__ out,
                        int64_t rows, int64_t vecs_per_row);
