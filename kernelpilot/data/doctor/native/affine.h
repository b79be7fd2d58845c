// The kernel of affine.cu, as binding.cpp launches it.
#pragma once

#include <cuda_runtime.h>

template <int kThreads>
__global__ void affine_kernel(const float* __restrict__ x, float* __restrict__ y, long n);
