// Row softmax over the last dimension, bf16 or fp32 in and out (the same dtype), fp32 math.
//
// One pass over DRAM: each row is loaded once into registers (split over a thread-block cluster
// when it is longer than 16K elements, see row_reduce.cuh), reduced once, and written once.
//
// The single reduction is "online": each thread first finds the max m_t of its own elements and
// sums exp(x - m_t); the (max, sum) pairs are then merged with  s = s_a * exp(m_a - m) +
// s_b * exp(m_b - m),  so max and sum travel together through one warp/CTA/cluster exchange.
// exp(x) is computed as exp2(x * log2(e)): maxima are kept pre-scaled by log2(e), so every
// element costs one FFMA and one MUFU.EX2 per pass.
#include "row_reduce.cuh"
#include "softmax.h"

namespace {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// (scaled max, sum of exp2(x * log2e - max)) for a set of elements; the empty set is (-inf, 0).
struct MaxSum {
  __device__ __forceinline__ float2 operator()(float2 a, float2 b) const {
    const float m = fmaxf(a.x, b.x);
    if (m == -INFINITY) return make_float2(m, 0.f);  // both empty (or all -inf): avoid inf - inf
    return make_float2(m, a.y * fast_exp2(a.x - m) + b.y * fast_exp2(b.x - m));
  }
};

}  // namespace

template <class T, int kThreads, int kVecs, int kCluster>
__global__ void __launch_bounds__(kThreads, rowwise::kMinResidentThreads / kThreads)
softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t n_cols) {
  using namespace rowwise;
  constexpr int kVecElems = kElems<T>;
  __shared__ ClusterSlots<kCluster> slots;
  cluster_slots_init(slots);
  const int64_t row = cta_row<kCluster>();
  const int first = slice_first_vector<kThreads, kVecs, kCluster>() + static_cast<int>(threadIdx.x);
  const int n_vecs = static_cast<int>(n_cols / kVecElems);
  const uint4* src = reinterpret_cast<const uint4*>(x + row * n_cols);
  uint4* dst = reinterpret_cast<uint4*>(y + row * n_cols);

  // Issue every load before using any, so kVecs x 16 B per thread are in flight.
  uint4 raw[kVecs];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    raw[i] = v < n_vecs ? load_stream(src + v) : make_uint4(0, 0, 0, 0);
  }

  // This thread's (max, sum) over its own elements.
  float local_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (first + i * kThreads < n_vecs) {
      float f[kVecElems];
      unpack<T>(raw[i], f);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) local_max = fmaxf(local_max, f[k]);
    }
  }
  float2 stat = make_float2(local_max * kLog2e, 0.f);
  if (local_max != -INFINITY) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (first + i * kThreads < n_vecs) {
        float f[kVecElems];
        unpack<T>(raw[i], f);
#pragma unroll
        for (int k = 0; k < kVecElems; ++k) stat.y += fast_exp2(fmaf(f[k], kLog2e, -stat.x));
      }
    }
  }

  stat = row_allreduce<kThreads, kCluster>(stat, MaxSum{}, slots);
  const float row_max = stat.x;
  const float inv_sum = 1.f / stat.y;

#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    if (v < n_vecs) {
      float f[kVecElems];
      unpack<T>(raw[i], f);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) f[k] = fast_exp2(fmaf(f[k], kLog2e, -row_max)) * inv_sum;
      store_stream(dst + v, pack<T>(f));
    }
  }
}

// The instances binding.cpp launches: rowwise::dispatch_row_shape's ten shapes (row_launch.h), bf16 and fp32.
template __global__ void softmax_rows<__nv_bfloat16, 128, 1, 1>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 128, 2, 1>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 128, 4, 1>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 256, 4, 1>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 256, 8, 1>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 256, 8, 2>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 256, 8, 4>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 256, 8, 8>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 256, 8, 16>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<__nv_bfloat16, 512, 8, 16>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
template __global__ void softmax_rows<float, 128, 1, 1>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 128, 2, 1>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 128, 4, 1>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 256, 4, 1>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 256, 8, 1>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 256, 8, 2>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 256, 8, 4>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 256, 8, 8>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 256, 8, 16>(const float*, float*, int64_t);
template __global__ void softmax_rows<float, 512, 8, 16>(const float*, float*, int64_t);
