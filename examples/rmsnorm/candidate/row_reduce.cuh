// Shared pieces of the row-wise kernels in this directory.
//
// A row of N bf16 values is split over a cluster of kCluster CTAs (kCluster = 1: one CTA) of
// kThreads threads; each thread keeps kVecs 16-byte vectors (8 bf16 each) of it in registers, so
// the row is read from DRAM exactly once. Vector slot i of thread t in CTA rank r covers vector
// index  r * kThreads * kVecs + i * kThreads + t  of the row: consecutive threads touch
// consecutive 16 B, so every warp access is 512 contiguous bytes.
//
// Reductions go thread -> warp (shuffles) -> CTA (one shared slot per warp) -> cluster (one
// shared slot per CTA, read by the peers through distributed shared memory).
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace rowwise {

constexpr int kVecElems = 8;  // bf16 per 16-byte vector

// Kernels ask ptxas for at least this many resident threads per SM (__launch_bounds__ min blocks),
// which caps them at 64 registers: 1024 threads x 8 vectors x 16 B = 128 KB of loads in flight per
// SM, and two CTAs per SM even for 512-thread CTAs, so one CTA's reduction overlaps another's loads.
constexpr int kMinResidentThreads = 1024;

// ---- 16-byte bf16 vectors ------------------------------------------------------------------

__device__ __forceinline__ void unpack(const uint4& raw, float (&f)[kVecElems]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 two = __bfloat1622float2(pairs[k]);
    f[2 * k] = two.x;
    f[2 * k + 1] = two.y;
  }
}

__device__ __forceinline__ uint4 pack(const float (&f)[kVecElems]) {
  uint4 raw;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) pairs[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  return raw;
}

// Every element is touched once. Plain 16-byte loads and stores: on our H200 the evict-first hints
// (__ldcs / __stcs) were 2-4% slower on 1 GiB rows at every N we timed (2026-11-30). A kernel that
// defines ROWWISE_EVICT_FIRST before including this header gets the hints (residual_rmsnorm_gate
// does: with plain accesses ptxas spilled 8-14 bytes in its 4-vector variants).
#ifdef ROWWISE_EVICT_FIRST
__device__ __forceinline__ uint4 load_stream(const uint4* p) { return __ldcs(p); }
__device__ __forceinline__ void store_stream(uint4* p, const uint4& v) { __stcs(p, v); }
#else
__device__ __forceinline__ uint4 load_stream(const uint4* p) { return *p; }
__device__ __forceinline__ void store_stream(uint4* p, const uint4& v) { *p = v; }
#endif

// ---- shuffles for the small value types the reductions carry ---------------------------------

__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
__device__ __forceinline__ float2 shfl_xor(float2 v, int lane_mask) {
  return make_float2(shfl_xor(v.x, lane_mask), shfl_xor(v.y, lane_mask));
}
__device__ __forceinline__ float3 shfl_xor(float3 v, int lane_mask) {
  return make_float3(shfl_xor(v.x, lane_mask), shfl_xor(v.y, lane_mask), shfl_xor(v.z, lane_mask));
}

// ---- cluster barrier halves -------------------------------------------------------------------

// Every thread of every CTA in the cluster must execute both, in this order, exactly once per use.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// All-reduce `v` over the row: every thread of every CTA of the cluster returns the same value,
// bit for bit (all of them combine the partials in the same order).
//
// Call it once per kernel. With kCluster > 1 it leaves the cluster barrier armed: the caller must
// call cluster_wait() before exiting, so that no CTA leaves while a peer may still read its slot
// (the wait is placed at the very end so that it overlaps the output pass).
template <int kThreads, int kCluster, class T, class Combine>
__device__ __forceinline__ T row_allreduce(T v, Combine combine) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(kCluster >= 1 && kCluster <= 8, "portable cluster sizes only");
  constexpr int kWarps = kThreads / 32;
  __shared__ T warp_partials[kWarps];
  __shared__ T cta_partial;

#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) v = combine(v, shfl_xor(v, mask));

  if constexpr (kWarps > 1) {
    if (threadIdx.x % 32 == 0) warp_partials[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_partials[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v = combine(v, warp_partials[w]);
  }

  if constexpr (kCluster > 1) {
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    if (threadIdx.x == 0) cta_partial = v;
    cluster.sync();  // every CTA's slot is written and visible
    v = *cluster.map_shared_rank(&cta_partial, 0);
#pragma unroll
    for (int rank = 1; rank < kCluster; ++rank) v = combine(v, *cluster.map_shared_rank(&cta_partial, rank));
    cluster_arrive();  // "done reading my peers"; matched by cluster_wait() before exit
  }
  return v;
}

// Where this CTA's slice of the row starts, in 16-byte vectors.
template <int kThreads, int kVecs, int kCluster>
__device__ __forceinline__ int slice_first_vector() {
  if constexpr (kCluster == 1) {
    return 0;
  } else {
    return static_cast<int>(cooperative_groups::this_cluster().block_rank()) * kThreads * kVecs;
  }
}

// The row this CTA works on (all CTAs of a cluster share one row).
template <int kCluster>
__device__ __forceinline__ int64_t cta_row() {
  return static_cast<int64_t>(blockIdx.x) / kCluster;
}

// Launch `kernel` with one cluster of kCluster CTAs per row.
template <int kThreads, int kCluster, class... Params, class... Args>
cudaError_t launch_rows(void (*kernel)(Params...), int64_t rows, cudaStream_t stream, Args... args) {
  if (rows == 0) return cudaSuccess;
  if (rows * kCluster > 0x7fffffffLL) return cudaErrorInvalidValue;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows * kCluster));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute cluster_shape[1];
  cluster_shape[0].id = cudaLaunchAttributeClusterDimension;
  cluster_shape[0].val.clusterDim.x = kCluster;
  cluster_shape[0].val.clusterDim.y = 1;
  cluster_shape[0].val.clusterDim.z = 1;
  config.attrs = cluster_shape;
  config.numAttrs = kCluster > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// The launch shape for a row of n_cols bf16, chosen so that each thread holds at most 8 vectors
// (32 registers of packed bf16) and rows longer than one CTA's share are split over a cluster.
//   N <=   1024: 128 threads x 1 vector        N <=  32768: cluster 2 x 256 threads x 8
//   N <=   2048: 128 x 2                       N <=  65536: cluster 4 x 256 x 8
//   N <=   4096: 128 x 4                       N <= 131072: cluster 8 x 256 x 8
//   N <=   8192: 256 x 4                       N <= 262144: cluster 8 x 512 x 8
//   N <=  16384: 256 x 8                       N <= 524288: cluster 8 x 1024 x 8
constexpr int64_t kMaxCols = 524288;

// Calls launch.template operator()<kThreads, kVecs, kCluster>() for the shape that fits n_cols.
template <class Launch>
cudaError_t dispatch_row_shape(int64_t n_cols, Launch&& launch) {
  if (n_cols <= 0 || n_cols % kVecElems != 0 || n_cols > kMaxCols) return cudaErrorInvalidValue;
  if (n_cols <= 1024) return launch.template operator()<128, 1, 1>();
  if (n_cols <= 2048) return launch.template operator()<128, 2, 1>();
  if (n_cols <= 4096) return launch.template operator()<128, 4, 1>();
  if (n_cols <= 8192) return launch.template operator()<256, 4, 1>();
  if (n_cols <= 16384) return launch.template operator()<256, 8, 1>();
  if (n_cols <= 32768) return launch.template operator()<256, 8, 2>();
  if (n_cols <= 65536) return launch.template operator()<256, 8, 4>();
  if (n_cols <= 131072) return launch.template operator()<256, 8, 8>();
  if (n_cols <= 262144) return launch.template operator()<512, 8, 8>();
  return launch.template operator()<1024, 8, 8>();
}

}  // namespace rowwise
