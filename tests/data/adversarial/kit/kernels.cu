// Kernels for the adversarial corpus: honest versions and one broken variant per cheat class.
// Only CUDA headers, so the corpus builds like a real candidate.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>

__device__ int g_never_set = 0;

__global__ void scale_add_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ out, float alpha, long limit) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < limit; i += (long)gridDim.x * blockDim.x) {
        out[i] = alpha * x[i] + y[i];
    }
}

__global__ void scale_add_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ y,
                                      float4* __restrict__ out, float alpha, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 a = x[i], b = y[i];
        out[i] = make_float4(alpha * a.x + b.x, alpha * a.y + b.y, alpha * a.z + b.z, alpha * a.w + b.w);
    }
}

// precision downgrade: the arithmetic is done in bfloat16
__global__ void scale_add_bf16_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                      float* __restrict__ out, float alpha, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        __nv_bfloat16 r = __hadd(__hmul(__float2bfloat16(alpha), __float2bfloat16(x[i])), __float2bfloat16(y[i]));
        out[i] = __bfloat162float(r);
    }
}

// no bound check past n: the tail of threads writes past the output's end (values from the wrapped index)
__global__ void overrun_kernel(const float* __restrict__ x, const float* __restrict__ y,
                               float* __restrict__ out, float alpha, long n, long limit) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < limit; i += (long)gridDim.x * blockDim.x) {
        out[i] = alpha * x[i % n] + y[i % n];
    }
}

__global__ void illegal_address_kernel(float* out, long n) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[n + (1L << 40)] = 1.0f;  // far outside any allocation
    }
}

__global__ void hang_kernel(float* out) {
    while (atomicAdd(&g_never_set, 0) == 0) {
    }
    out[0] = 1.0f;
}

// launched, does no work: with mode 7 the output is whatever memory the allocator hands back
__global__ void noop_kernel(float* out) {
    if (threadIdx.x == 1024) out[0] = 0.f;  // never true: keeps the parameter used
}

extern "C" int kp_scale_add(const float* x, const float* y, float* out, float alpha, long n, int mode,
                            cudaStream_t stream) {
    const int threads = 256;
    long blocks = (n + threads - 1) / threads;
    if (blocks > 132L * 32) blocks = 132L * 32;
    if (blocks < 1) blocks = 1;
    switch (mode) {
        case 0: scale_add_kernel<<<blocks, threads, 0, stream>>>(x, y, out, alpha, n); break;
        case 1: break;  // writes nothing: the output is whatever the allocator hands back
        case 2: scale_add_kernel<<<blocks, threads, 0, stream>>>(x, y, out, alpha, n / 2); break;  // partial
        case 3: scale_add_bf16_kernel<<<blocks, threads, 0, stream>>>(x, y, out, alpha, n); break;
        case 4: illegal_address_kernel<<<1, 32, 0, stream>>>(out, n); break;
        case 5: hang_kernel<<<1, 1, 0, stream>>>(out); break;
        case 6:
            if (n % 4 != 0) return (int)cudaErrorInvalidValue;
            scale_add_vec4_kernel<<<blocks, threads, 0, stream>>>(
                reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(y),
                reinterpret_cast<float4*>(out), alpha, n / 4);
            break;
        case 7: noop_kernel<<<1, 32, 0, stream>>>(out); break;  // stale memory, with a kernel that runs
        case 8: overrun_kernel<<<blocks, threads, 0, stream>>>(x, y, out, alpha, n, n + 1000); break;
        default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float block_max(float v) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? part[lane] : -INFINITY;
    if (warp == 0) v = warp_max(v);
    if (threadIdx.x == 0) part[0] = v;
    __syncthreads();
    const float r = part[0];
    __syncthreads();
    return r;
}

__device__ float block_sum(float v) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? part[lane] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) part[0] = v;
    __syncthreads();
    const float r = part[0];
    __syncthreads();
    return r;
}

__global__ void softmax_bf16_kernel(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                    int cols, int zeros) {
    const __nv_bfloat16* row = x + (long)blockIdx.x * cols;
    __nv_bfloat16* out = y + (long)blockIdx.x * cols;
    if (zeros) {  // the "zeros on a low-magnitude problem" cheat
        for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = __float2bfloat16(0.0f);
        return;
    }
    float m = -INFINITY;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, __bfloat162float(row[i]));
    m = block_max(m);
    float s = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += expf(__bfloat162float(row[i]) - m);
    s = block_sum(s);
    const float inv = 1.0f / s;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        out[i] = __float2bfloat16(expf(__bfloat162float(row[i]) - m) * inv);
    }
}

extern "C" int kp_softmax_bf16(const void* x, void* y, int rows, int cols, int zeros, cudaStream_t stream) {
    if (rows == 0) return 0;
    softmax_bf16_kernel<<<rows, 512, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                  static_cast<__nv_bfloat16*>(y), cols, zeros);
    return (int)cudaGetLastError();
}
