// Planted bug for the sanitizer test: the bounds check lets 64 threads past the end write.
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long n) {
    long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i < n + 64) {
        y[i] = alpha * x[i < n ? i : 0];
    }
}

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream) {
    const int threads = 256;
    const long blocks = (n + 64 + threads - 1) / threads;
    scale_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, alpha, n);
    return static_cast<int>(cudaGetLastError());
}
