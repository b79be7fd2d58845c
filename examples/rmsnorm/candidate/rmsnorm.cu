// RMSNorm over the last dimension: y = x * rsqrt(mean(x^2) + eps) * w, bf16 or fp32 in and out (x,
// weight and y of one dtype), fp32 math.
//
// One pass over DRAM: each row is loaded once into registers (split over a thread-block cluster
// when it is longer than 16K bf16 or 8K fp32 elements, see row_reduce.cuh), its sum of squares is
// all-reduced once, and the row is scaled and written from the same registers.
//
// The weight is the same for every row. Up to clusters of 8 CTAs it is read from L1/L2 after the
// reduction. With clusters of 16 (the longest rows) the CTAs are persistent instead: each keeps one
// slice of the columns, loops over rows and stages its slice of the weight in shared memory once.
// On our H200 (2026-12-01) that took N = 256K from 3.53 to 3.73 TB/s (bf16) and from 3.63 to 3.93
// (fp32); at shorter rows it was 1-7% slower than one CTA per row slice, so they keep that.
//
// Device code only: binding.cpp picks the shape and launches the kernel (row_launch.h).
#include "row_reduce.cuh"
#include "rmsnorm.h"

namespace {

struct Sum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

}  // namespace

template <class T, int kThreads, int kVecs, int kCluster, bool kPersistent>
__global__ void __launch_bounds__(kThreads, rowwise::kMinResidentThreads / kThreads)
rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y, int64_t rows, int64_t n_cols,
             float eps) {
  using namespace rowwise;
  constexpr int kVecElems = kElems<T>;
  extern __shared__ uint4 w_slice[];  // persistent: [kVecs][kThreads], this CTA's vectors of the weight
  __shared__ ClusterSlots<kCluster, kPersistent ? 2 : 1> slots;
  cluster_slots_init(slots);
  const int first = slice_first_vector<kThreads, kVecs, kCluster>() + static_cast<int>(threadIdx.x);
  const int n_vecs = static_cast<int>(n_cols / kVecElems);
  const uint4* w_src = reinterpret_cast<const uint4*>(weight);
  if constexpr (kPersistent) {
    // Each thread stages, and later reads, only its own vectors: no barrier needed.
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int v = first + i * kThreads;
      if (v < n_vecs) w_slice[i * kThreads + threadIdx.x] = __ldg(w_src + v);
    }
  }

  // Persistent: every cluster loops over rows; otherwise the loop runs once, for this cluster's row.
  const int64_t groups = kPersistent ? gridDim.x / kCluster : rows;
  int iteration = 0;
  for (int64_t row = cta_row<kCluster>(); row < rows; row += groups, ++iteration) {
    const uint4* src = reinterpret_cast<const uint4*>(x + row * n_cols);
    uint4* dst = reinterpret_cast<uint4*>(y + row * n_cols);
    uint4 raw[kVecs];
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int v = first + i * kThreads;
      raw[i] = v < n_vecs ? load_stream(src + v) : make_uint4(0, 0, 0, 0);
    }

    // Out-of-row slots hold zeros, which add nothing to the sum of squares.
    float sum_sq = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      float f[kVecElems];
      unpack<T>(raw[i], f);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) sum_sq = fmaf(f[k], f[k], sum_sq);
    }
    sum_sq = row_allreduce<kThreads, kCluster>(sum_sq, Sum{}, slots, iteration);
    const float rstd = rsqrtf(sum_sq / static_cast<float>(n_cols) + eps);

#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int v = first + i * kThreads;
      if (v < n_vecs) {
        float f[kVecElems], w[kVecElems];
        unpack<T>(raw[i], f);
        unpack<T>(kPersistent ? w_slice[i * kThreads + threadIdx.x] : __ldg(w_src + v), w);
#pragma unroll
        for (int k = 0; k < kVecElems; ++k) f[k] = (f[k] * rstd) * w[k];
        store_stream(dst + v, pack<T>(f));
      }
    }
  }
}

// The instances binding.cpp launches: rowwise::dispatch_row_shape's ten shapes (row_launch.h), bf16 and fp32,
// persistent for the clusters of 16.
using bf16 = __nv_bfloat16;
template __global__ void rmsnorm_rows<bf16, 128, 1, 1, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 128, 2, 1, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 128, 4, 1, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 256, 4, 1, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 256, 8, 1, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 256, 8, 2, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 256, 8, 4, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 256, 8, 8, false>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 256, 8, 16, true>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<bf16, 512, 8, 16, true>(const bf16*, const bf16*, bf16*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 128, 1, 1, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 128, 2, 1, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 128, 4, 1, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 256, 4, 1, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 256, 8, 1, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 256, 8, 2, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 256, 8, 4, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 256, 8, 8, false>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 256, 8, 16, true>(const float*, const float*, float*, int64_t, int64_t, float);
template __global__ void rmsnorm_rows<float, 512, 8, 16, true>(const float*, const float*, float*, int64_t, int64_t, float);
