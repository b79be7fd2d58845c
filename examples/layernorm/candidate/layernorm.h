// The kernel of layernorm.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// y[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * weight + bias for the row r of each cluster of kCluster CTAs;
// n_cols a multiple of the elements in 16 bytes, at most kCluster * kThreads * kVecs vectors; pointers 16-byte
// aligned.
template <class T, int kThreads, int kVecs, int kCluster>
__global__ void layernorm_rows(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                               T* __restrict__ y, int64_t n_cols, float eps);
