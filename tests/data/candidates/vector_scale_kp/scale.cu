// y = alpha * x, one element per thread: device code only (binding.cpp launches it).
#include "scale.h"

template <int kThreads>
__global__ void __launch_bounds__(kThreads) scale_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                          float alpha, long n) {
    long i = blockIdx.x * static_cast<long>(kThreads) + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i];
    }
}

template __global__ void scale_kernel<128>(const float*, float*, float, long);
template __global__ void scale_kernel<256>(const float*, float*, float, long);
template __global__ void scale_kernel<512>(const float*, float*, float, long);

// A kernel that is no template: in every part of a split build.
__global__ void fill_kernel(float* __restrict__ y, float value, long n) {
    long i = blockIdx.x * 256L + threadIdx.x;
    if (i < n) y[i] = value;
}
