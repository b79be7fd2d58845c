// Scaled residual add + RMSNorm + SiLU gate in one pass, bf16 in and out, fp32 math:
//   h   = bf16(bf16(x * scale) + residual)              (rounded twice, exactly as PyTorch does)
//   out = bf16(h * rsqrt(mean(h^2) + eps) * w * silu(gate))
//
// Each row of x and residual is read once into registers (split over a thread-block cluster for
// rows longer than 16K, see row_reduce.cuh); h is stored at once and kept in registers for the
// sum of squares; after one all-reduce the gate and weight are read and out is written. DRAM
// traffic is the minimum: three reads and two writes per element.
#define ROWWISE_EVICT_FIRST  // see row_reduce.cuh: plain accesses spill here
#include "row_reduce.cuh"

namespace {

struct Sum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

template <int kThreads, int kVecs, int kCluster>
__global__ void __launch_bounds__(kThreads, rowwise::kMinResidentThreads / kThreads)
residual_rmsnorm_gate_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
                           const __nv_bfloat16* __restrict__ gate, const __nv_bfloat16* __restrict__ weight,
                           __nv_bfloat16* __restrict__ h_out, __nv_bfloat16* __restrict__ out, int64_t n_cols,
                           float scale, float eps) {
  using namespace rowwise;
  constexpr int kVecElems = kElems<__nv_bfloat16>;
  __shared__ ClusterSlots<kCluster> slots;
  cluster_slots_init(slots);
  const int64_t row = cta_row<kCluster>();
  const int first = slice_first_vector<kThreads, kVecs, kCluster>() + static_cast<int>(threadIdx.x);
  const int n_vecs = static_cast<int>(n_cols / kVecElems);
  const int64_t row_offset = row * n_vecs;  // in vectors
  const uint4* x_src = reinterpret_cast<const uint4*>(x) + row_offset;
  const uint4* r_src = reinterpret_cast<const uint4*>(residual) + row_offset;
  const uint4* g_src = reinterpret_cast<const uint4*>(gate) + row_offset;
  const uint4* w_src = reinterpret_cast<const uint4*>(weight);
  uint4* h_dst = reinterpret_cast<uint4*>(h_out) + row_offset;
  uint4* o_dst = reinterpret_cast<uint4*>(out) + row_offset;

  uint4 h[kVecs], r[kVecs];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    h[i] = v < n_vecs ? load_stream(x_src + v) : make_uint4(0, 0, 0, 0);
    r[i] = v < n_vecs ? load_stream(r_src + v) : make_uint4(0, 0, 0, 0);
  }

  // h = x * scale + residual with PyTorch's two bf16 roundings; out-of-row slots stay zero.
  float sum_sq = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float fx[kVecElems], fr[kVecElems];
    unpack<__nv_bfloat16>(h[i], fx);
    unpack<__nv_bfloat16>(r[i], fr);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) {
      fx[k] = __bfloat162float(__float2bfloat16_rn(fx[k] * scale)) + fr[k];
    }
    h[i] = pack<__nv_bfloat16>(fx);  // rounds the sum to bf16
    unpack<__nv_bfloat16>(h[i], fx);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) sum_sq = fmaf(fx[k], fx[k], sum_sq);
    const int v = first + i * kThreads;
    if (v < n_vecs) store_stream(h_dst + v, h[i]);
  }

  sum_sq = row_allreduce<kThreads, kCluster>(sum_sq, Sum{}, slots);
  const float rstd = rsqrtf(sum_sq / static_cast<float>(n_cols) + eps);

#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = first + i * kThreads;
    if (v < n_vecs) {
      float f[kVecElems], g[kVecElems], w[kVecElems];
      unpack<__nv_bfloat16>(h[i], f);
      unpack<__nv_bfloat16>(load_stream(g_src + v), g);
      unpack<__nv_bfloat16>(__ldg(w_src + v), w);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) f[k] = ((f[k] * rstd) * w[k]) * silu(g[k]);
      store_stream(o_dst + v, pack<__nv_bfloat16>(f));
    }
  }
}

struct Launch {
  const __nv_bfloat16 *x, *residual, *gate, *weight;
  __nv_bfloat16 *h, *out;
  int64_t rows, n_cols;
  float scale, eps;
  cudaStream_t stream;

  template <int kThreads, int kVecs, int kCluster>
  cudaError_t operator()() const {
    return rowwise::launch_rows<kThreads, kCluster>(residual_rmsnorm_gate_rows<kThreads, kVecs, kCluster>, rows,
                                                    stream, x, residual, gate, weight, h, out, n_cols, scale, eps);
  }
};

// Two inputs are held per element here (x, then h, and residual), so a thread keeps at most 4
// vectors of each (the 8-vector shapes of rowwise::dispatch_row_shape spill at 64 registers):
//   N <=  1024: 128 x 1      N <=  8192: 256 x 4      N <=  65536: cluster 4 x 512 x 4
//   N <=  2048: 128 x 2      N <= 16384: 512 x 4      N <= 131072: cluster 8 x 512 x 4
//   N <=  4096: 128 x 4      N <= 32768: cluster 2 x 512 x 4      N <= 262144: cluster 8 x 1024 x 4
constexpr int64_t kMaxCols = 262144;

cudaError_t dispatch(const Launch& launch) {
  const int64_t n = launch.n_cols;
  if (n <= 0 || n % rowwise::kElems<__nv_bfloat16> != 0 || n > kMaxCols) return cudaErrorInvalidValue;
  if (n <= 1024) return launch.operator()<128, 1, 1>();
  if (n <= 2048) return launch.operator()<128, 2, 1>();
  if (n <= 4096) return launch.operator()<128, 4, 1>();
  if (n <= 8192) return launch.operator()<256, 4, 1>();
  if (n <= 16384) return launch.operator()<512, 4, 1>();
  if (n <= 32768) return launch.operator()<512, 4, 2>();
  if (n <= 65536) return launch.operator()<512, 4, 4>();
  if (n <= 131072) return launch.operator()<512, 4, 8>();
  return launch.operator()<1024, 4, 8>();
}

}  // namespace

// For r < rows: h[r] = x[r] * scale + residual[r]; out[r] = rmsnorm(h[r]) * weight * silu(gate[r]).
// Needs n_cols % 8 == 0, n_cols <= 262144 and 16-byte aligned pointers (the binding checks);
// returns cudaErrorInvalidValue otherwise.
extern "C" cudaError_t residual_rmsnorm_gate_bf16(const void* x, const void* residual, const void* gate,
                                                  const void* weight, void* h, void* out, int64_t rows,
                                                  int64_t n_cols, float scale, float eps, cudaStream_t stream) {
  using bf16 = __nv_bfloat16;
  Launch launch{static_cast<const bf16*>(x),      static_cast<const bf16*>(residual), static_cast<const bf16*>(gate),
                static_cast<const bf16*>(weight), static_cast<bf16*>(h),              static_cast<bf16*>(out),
                rows,                             n_cols,                             scale,
                eps,                              stream};
  return dispatch(launch);
}
