// kernel.cu with an undefined name on line 6 and a missing semicolon at the end of line 7 (nvcc reports it at line 8).
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long n) {
    long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + undefined_offset;
    long j = i + 1
}

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream) {
    scale_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, y, alpha, n);
    return static_cast<int>(cudaGetLastError());
}
