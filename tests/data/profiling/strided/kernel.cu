// Deliberately slow for the profiler test: each warp's threads touch addresses 33 floats apart,
// so every 4-byte access pulls its own 32-byte sector (1/8 of each sector used).
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long n) {
    long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i < n) {
        long j = (i * 33) % n;
        y[j] = alpha * x[j];
    }
}

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream) {
    const int threads = 256;
    const long blocks = (n + threads - 1) / threads;
    scale_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, alpha, n);
    return static_cast<int>(cudaGetLastError());
}
