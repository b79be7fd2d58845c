// Scaled residual add + RMSNorm + SiLU gate in one pass, bf16 in and out, fp32 math:
//   h   = bf16(bf16(x * scale) + residual)              (rounded twice, exactly as PyTorch does)
//   out = bf16(h * rsqrt(mean(h^2) + eps) * w * silu(gate))
//
// Each row of x and residual is read once into registers (split over a thread-block cluster for
// rows longer than 16K, see row_reduce.cuh); h is stored at once and kept in registers for the
// sum of squares; after one all-reduce the gate and weight are read and out is written. DRAM
// traffic is the minimum: three reads and two writes per element.
//
// Device code only: binding.cpp picks the shape and launches the kernel (row_launch.h).
#define ROWWISE_EVICT_FIRST  // see row_reduce.cuh: plain accesses spill here
#include "row_reduce.cuh"
#include "residual_rmsnorm_gate.h"

namespace {

struct Sum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

}  // namespace

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

// The instances binding.cpp launches: its nine shapes (threads x vectors per thread x cluster).
using bf16 = __nv_bfloat16;
template __global__ void residual_rmsnorm_gate_rows<128, 1, 1>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<128, 2, 1>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<128, 4, 1>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<256, 4, 1>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<512, 4, 1>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<512, 4, 2>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<512, 4, 4>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<512, 4, 8>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
template __global__ void residual_rmsnorm_gate_rows<1024, 4, 8>(const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, float, float);
