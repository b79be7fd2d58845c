// The kernels of cross_entropy.cu as binding.cpp launches them (both include these declarations).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// loss[r] = logsumexp(logits[r, :]) - logits[r, targets[r]] for r = blockIdx.x (0 where targets[r] ==
// ignore_index, NaN where it is out of range); one CTA of kThreads threads per row, n_cols a multiple of the
// elements in 16 bytes, logits 16-byte aligned.
template <class T, int kThreads>
__global__ void row_losses(const T* __restrict__ logits, const int64_t* __restrict__ targets, float* __restrict__ loss,
                           int64_t n_cols, int64_t ignore_index);

// out[0] = the mean of loss[r] over the rows whose target is not ignore_index (NaN when there are none); one
// cluster of kMeanCtas CTAs (its __cluster_dims__) of kMeanThreads threads.
template <int kMeanCtas, int kMeanThreads>
__global__ void mean_loss(const float* __restrict__ loss, const int64_t* __restrict__ targets, float* __restrict__ out,
                          int64_t rows, int64_t ignore_index);
