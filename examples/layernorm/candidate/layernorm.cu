// LayerNorm over the last dimension: y = (x - mean) * rsqrt(var + eps) * w + b, bf16 in and out,
// fp32 math.
//
// One pass over DRAM: each row is loaded once into registers (split over a thread-block cluster
// when it is longer than 16K bf16 or 8K fp32 elements, see row_reduce.cuh) and written once from
// them; weight and bias are read after the reduction (from L1/L2: they are the same for every row).
//
// Mean and variance need a single exchange: each thread computes the count, mean and sum of
// squared deviations (M2) of its own elements (in one or two sweeps, see below), and the triples
// are merged with Chan's formula
//   n = n_a + n_b,  d = mean_b - mean_a,  mean = mean_a + d * n_b / n,
//   M2 = M2_a + M2_b + d^2 * n_a * n_b / n,
// which, unlike sum(x^2) - n * mean^2, does not cancel when |mean| >> std.
//
// Device code only: binding.cpp picks the shape and launches the kernel (row_launch.h).
#include "row_reduce.cuh"
#include "layernorm.h"

namespace {

// float3 = (count, mean, M2)
struct MeanM2 {
  __device__ __forceinline__ float3 operator()(float3 a, float3 b) const {
    const float n = a.x + b.x;
    if (n == 0.f) return a;
    const float d = b.y - a.y;
    const float fb = __fdividef(b.x, n);  // counts are exact; 2 ulp here is far below the data's own error
    return make_float3(n, fmaf(d, fb, a.y), a.z + b.z + d * d * a.x * fb);
  }
};

}  // namespace

template <class T, int kThreads, int kVecs, int kCluster>
__global__ void __launch_bounds__(kThreads, rowwise::kMinResidentThreads / kThreads)
layernorm_rows(const T* __restrict__ x, const T* __restrict__ weight,
               const T* __restrict__ bias, T* __restrict__ y, int64_t n_cols, float eps) {
  using namespace rowwise;
  constexpr int kVecElems = kElems<T>;
  __shared__ ClusterSlots<kCluster> slots;
  cluster_slots_init(slots);
  const int64_t row = cta_row<kCluster>();
  const int first = slice_first_vector<kThreads, kVecs, kCluster>() + static_cast<int>(threadIdx.x);
  const int n_vecs = static_cast<int>(n_cols / kVecElems);
  const uint4* src = reinterpret_cast<const uint4*>(x + row * n_cols);
  const uint4* w_src = reinterpret_cast<const uint4*>(weight);
  const uint4* b_src = reinterpret_cast<const uint4*>(bias);
  uint4* dst = reinterpret_cast<uint4*>(y + row * n_cols);

  uint4 raw[kVecs];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    raw[i] = v < n_vecs ? load_stream(src + v) : make_uint4(0, 0, 0, 0);
  }

  // This thread's (count, mean, M2). Two sweeps over its registers (the sum, then the squared
  // deviations from the thread's mean) or one (sums of x - c and (x - c)^2, c the thread's first
  // element, which keeps the shifted sums small where |mean| >> std). One sweep is fewer instructions
  // but more live registers: on our H200 (2026-12-01) it took bf16 N = 64K / 128K / 256K from 3.44 /
  // 3.33 / 3.12 to 3.66 / 3.53 / 3.29 TB/s and fp32 128K / 256K from 3.25 / 2.95 to 3.43 / 3.10, but
  // fp32 rows on clusters of up to 8 CTAs went 2-4% slower, so those keep two sweeps.
  constexpr bool kOneSweep = sizeof(T) == 2 || kCluster == 16;
  float count = 0.f, sum = 0.f, sum_sq = 0.f;
  float shift = 0.f;
  if (kOneSweep && first < n_vecs) {
    float f[kVecElems];
    unpack<T>(raw[0], f);
    shift = f[0];
  }
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (first + i * kThreads < n_vecs) {
      float f[kVecElems];
      unpack<T>(raw[i], f);
      count += kVecElems;
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) {
        const float d = f[k] - shift;
        sum += d;
        if constexpr (kOneSweep) sum_sq = fmaf(d, d, sum_sq);
      }
    }
  }
  float local_mean, m2;
  if constexpr (kOneSweep) {
    const float local_d = count > 0.f ? __fdividef(sum, count) : 0.f;
    local_mean = shift + local_d;
    m2 = fmaxf(fmaf(-sum, local_d, sum_sq), 0.f);  // sum of (x - mean)^2 = sum of d^2 - sum(d) * mean(d)
  } else {
    local_mean = count > 0.f ? sum / count : 0.f;
    m2 = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (first + i * kThreads < n_vecs) {
        float f[kVecElems];
        unpack<T>(raw[i], f);
#pragma unroll
        for (int k = 0; k < kVecElems; ++k) m2 = fmaf(f[k] - local_mean, f[k] - local_mean, m2);
      }
    }
  }

  const float3 stat = row_allreduce<kThreads, kCluster>(make_float3(count, local_mean, m2), MeanM2{}, slots);
  const float mean = stat.y;
  const float rstd = rsqrtf(stat.z / stat.x + eps);

#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    if (v < n_vecs) {
      float f[kVecElems], w[kVecElems], b[kVecElems];
      unpack<T>(raw[i], f);
      unpack<T>(__ldg(w_src + v), w);
      unpack<T>(__ldg(b_src + v), b);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) f[k] = fmaf((f[k] - mean) * rstd, w[k], b[k]);
      store_stream(dst + v, pack<T>(f));
    }
  }
}

// The instances binding.cpp launches: rowwise::dispatch_row_shape's ten shapes (row_launch.h), bf16 and fp32;
// fp32 takes 512 x 4 in place of 256 x 8 in one CTA (see binding.cpp).
using bf16 = __nv_bfloat16;
template __global__ void layernorm_rows<bf16, 128, 1, 1>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 128, 2, 1>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 128, 4, 1>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 256, 4, 1>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 256, 8, 1>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 256, 8, 2>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 256, 8, 4>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 256, 8, 8>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 256, 8, 16>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<bf16, 512, 8, 16>(const bf16*, const bf16*, const bf16*, bf16*, int64_t, float);
template __global__ void layernorm_rows<float, 128, 1, 1>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 128, 2, 1>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 128, 4, 1>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 256, 4, 1>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 512, 4, 1>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 256, 8, 2>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 256, 8, 4>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 256, 8, 8>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 256, 8, 16>(const float*, const float*, const float*, float*, int64_t, float);
template __global__ void layernorm_rows<float, 512, 8, 16>(const float*, const float*, const float*, float*, int64_t, float);
