// Planted race for the racecheck test: neighbours read a shared-memory slot before its writer's
// store is ordered by a barrier (the __syncthreads() that belongs after the store is missing).
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long n) {
    __shared__ float tile[256];
    long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.f;
    float mine = tile[threadIdx.x];
    float next = tile[(threadIdx.x + 1) % blockDim.x];  // racy: no barrier after the store
    if (i < n) {
        y[i] = alpha * mine + 0.f * next;
    }
}

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream) {
    const int threads = 256;
    const long blocks = (n + threads - 1) / threads;
    scale_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, alpha, n);
    return static_cast<int>(cudaGetLastError());
}
