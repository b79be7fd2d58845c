// y = alpha * x, one element per thread. Only CUDA headers: an edit here rebuilds this file alone.
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long n) {
    long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i];
    }
}

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream) {
    if (n == 0) {
        return 0;
    }
    const int threads = 256;
    const long blocks = (n + threads - 1) / threads;
    scale_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, alpha, n);
    return static_cast<int>(cudaGetLastError());
}
