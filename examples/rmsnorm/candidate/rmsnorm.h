// The kernel of rmsnorm.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * weight for the rows of each cluster of kCluster CTAs: one row
// per cluster, or (kPersistent) rows cluster index, + number of clusters, ... < rows, with kThreads * kVecs 16-byte
// vectors of dynamic shared memory per CTA for its slice of the weight. n_cols a multiple of the elements in 16
// bytes, at most kCluster * kThreads * kVecs vectors; pointers 16-byte aligned.
template <class T, int kThreads, int kVecs, int kCluster, bool kPersistent>
__global__ void rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y, int64_t rows,
                             int64_t n_cols, float eps);
