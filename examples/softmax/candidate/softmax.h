// The kernel of softmax.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// y[r, :] = softmax(x[r, :]) for the row r of each cluster of kCluster CTAs; n_cols a multiple of the
// elements in 16 bytes, at most kCluster * kThreads * kVecs vectors; x and y 16-byte aligned.
template <class T, int kThreads, int kVecs, int kCluster>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t n_cols);
