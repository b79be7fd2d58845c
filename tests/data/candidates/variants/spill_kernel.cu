// A second kernel file whose kernel needs more registers than __launch_bounds__ allows: ptxas spills.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(1024, 2) spill_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    float acc[64];
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 64; ++k) acc[k] = x[(t * 64 + k) % n];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int k = 0; k < 64; ++k) acc[k] = acc[k] * acc[(k + r + 1) % 64] + 1.0f;
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 64; ++k) s += acc[k];
    if (t < n) y[t] = s;
}

__global__ void local_array_kernel(const float* __restrict__ x, const int* __restrict__ idx, float* __restrict__ y, int n) {
    float buf[256];  // indexed at run time: lives in local memory (stack frame)
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 256; ++k) buf[k] = x[(t + k) % n];
    if (t < n) y[t] = buf[idx[t] & 255];
}

extern "C" int kp_spill_launch(const float* x, float* y, int n, cudaStream_t stream) {
    spill_kernel<<<(n + 1023) / 1024, 1024, 0, stream>>>(x, y, n);
    return static_cast<int>(cudaGetLastError());
}
