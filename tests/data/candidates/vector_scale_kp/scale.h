// The kernels of scale.cu, as binding.cpp launches them.
#pragma once

#include <cuda_runtime.h>

template <int kThreads>
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long n);

__global__ void fill_kernel(float* __restrict__ y, float value, long n);
