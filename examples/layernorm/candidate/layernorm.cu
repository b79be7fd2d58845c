// LayerNorm over the last dimension: y = (x - mean) * rsqrt(var + eps) * w + b, bf16 in and out,
// fp32 math.
//
// One pass over DRAM: each row is loaded once into registers (split over a thread-block cluster
// when it is longer than 16K elements, see row_reduce.cuh) and written once from them.
//
// Mean and variance need a single exchange: each thread computes the count, mean and sum of
// squared deviations (M2) of its own elements, and the triples are merged with Chan's formula
//   n = n_a + n_b,  d = mean_b - mean_a,  mean = mean_a + d * n_b / n,
//   M2 = M2_a + M2_b + d^2 * n_a * n_b / n,
// which, unlike sum(x^2) - n * mean^2, does not cancel when |mean| >> std.
#include "row_reduce.cuh"

namespace {

// float3 = (count, mean, M2)
struct MeanM2 {
  __device__ __forceinline__ float3 operator()(float3 a, float3 b) const {
    const float n = a.x + b.x;
    if (n == 0.f) return a;
    const float d = b.y - a.y;
    const float fb = b.x / n;
    return make_float3(n, fmaf(d, fb, a.y), a.z + b.z + d * d * a.x * fb);
  }
};

template <int kThreads, int kVecs, int kCluster>
__global__ void __launch_bounds__(kThreads, rowwise::kMinResidentThreads / kThreads)
layernorm_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
               const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ y, int64_t n_cols, float eps) {
  using namespace rowwise;
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

  // This thread's (count, mean, M2): two sweeps over its registers.
  float count = 0.f, sum = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (first + i * kThreads < n_vecs) {
      float f[kVecElems];
      unpack(raw[i], f);
      count += kVecElems;
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) sum += f[k];
    }
  }
  const float local_mean = count > 0.f ? sum / count : 0.f;
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (first + i * kThreads < n_vecs) {
      float f[kVecElems];
      unpack(raw[i], f);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) m2 = fmaf(f[k] - local_mean, f[k] - local_mean, m2);
    }
  }

  const float3 stat = row_allreduce<kThreads, kCluster>(make_float3(count, local_mean, m2), MeanM2{});
  const float mean = stat.y;
  const float rstd = rsqrtf(stat.z / stat.x + eps);

#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    if (v < n_vecs) {
      float f[kVecElems], w[kVecElems], b[kVecElems];
      unpack(raw[i], f);
      unpack(__ldg(w_src + v), w);
      unpack(__ldg(b_src + v), b);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) f[k] = fmaf((f[k] - mean) * rstd, w[k], b[k]);
      store_stream(dst + v, pack(f));
    }
  }
  if constexpr (kCluster > 1) cluster_wait();
}

struct LayerNormLaunch {
  const __nv_bfloat16* x;
  const __nv_bfloat16* weight;
  const __nv_bfloat16* bias;
  __nv_bfloat16* y;
  int64_t rows, n_cols;
  float eps;
  cudaStream_t stream;

  template <int kThreads, int kVecs, int kCluster>
  cudaError_t operator()() const {
    return rowwise::launch_rows<kThreads, kCluster>(layernorm_rows<kThreads, kVecs, kCluster>, rows, stream, x,
                                                    weight, bias, y, n_cols, eps);
  }
};

}  // namespace

// y[r, :] = layer_norm(x[r, :]) * weight + bias for r < rows. Needs n_cols % 8 == 0,
// n_cols <= 524288 and 16-byte aligned pointers (the binding checks); returns
// cudaErrorInvalidValue otherwise.
extern "C" cudaError_t layernorm_bf16(const void* x, const void* weight, const void* bias, void* y, int64_t rows,
                                      int64_t n_cols, float eps, cudaStream_t stream) {
  LayerNormLaunch launch{static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(weight),
                         static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(y), rows, n_cols,
                         eps, stream};
  return rowwise::dispatch_row_shape(n_cols, launch);
}
