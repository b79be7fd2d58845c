// RMSNorm over the last dimension: y = x * rsqrt(mean(x^2) + eps) * w, bf16 in and out, fp32 math.
//
// One pass over DRAM: each row is loaded once into registers (split over a thread-block cluster
// when it is longer than 16K elements, see row_reduce.cuh), its sum of squares is all-reduced once,
// and the row is scaled and written from the same registers. The weight is read after the
// reduction (it is the same for every row, so it comes from L2 and keeps no registers busy while
// the row loads are in flight).
#include "row_reduce.cuh"

namespace {

struct Sum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

template <int kThreads, int kVecs, int kCluster>
__global__ void __launch_bounds__(kThreads, rowwise::kMinResidentThreads / kThreads)
rmsnorm_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
             __nv_bfloat16* __restrict__ y, int64_t n_cols, float eps) {
  using namespace rowwise;
  const int64_t row = cta_row<kCluster>();
  const int first = slice_first_vector<kThreads, kVecs, kCluster>() + static_cast<int>(threadIdx.x);
  const int n_vecs = static_cast<int>(n_cols / kVecElems);
  const uint4* src = reinterpret_cast<const uint4*>(x + row * n_cols);
  const uint4* w_src = reinterpret_cast<const uint4*>(weight);
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
    unpack(raw[i], f);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) sum_sq = fmaf(f[k], f[k], sum_sq);
  }
  sum_sq = row_allreduce<kThreads, kCluster>(sum_sq, Sum{});
  const float rstd = rsqrtf(sum_sq / static_cast<float>(n_cols) + eps);

#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    if (v < n_vecs) {
      float f[kVecElems], w[kVecElems];
      unpack(raw[i], f);
      unpack(__ldg(w_src + v), w);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) f[k] = (f[k] * rstd) * w[k];
      store_stream(dst + v, pack(f));
    }
  }
  if constexpr (kCluster > 1) cluster_wait();
}

struct RmsNormLaunch {
  const __nv_bfloat16* x;
  const __nv_bfloat16* weight;
  __nv_bfloat16* y;
  int64_t rows, n_cols;
  float eps;
  cudaStream_t stream;

  template <int kThreads, int kVecs, int kCluster>
  cudaError_t operator()() const {
    return rowwise::launch_rows<kThreads, kCluster>(rmsnorm_rows<kThreads, kVecs, kCluster>, rows, stream, x, weight,
                                                    y, n_cols, eps);
  }
};

}  // namespace

// y[r, :] = rmsnorm(x[r, :]) * weight for r < rows. Needs n_cols % 8 == 0, n_cols <= 524288 and
// 16-byte aligned pointers (the binding checks); returns cudaErrorInvalidValue otherwise.
extern "C" cudaError_t rmsnorm_bf16(const void* x, const void* weight, void* y, int64_t rows, int64_t n_cols,
                                    float eps, cudaStream_t stream) {
  RmsNormLaunch launch{static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(weight),
                       static_cast<__nv_bfloat16*>(y), rows, n_cols, eps, stream};
  return rowwise::dispatch_row_shape(n_cols, launch);
}
