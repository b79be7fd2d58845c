// Shared device code of the row-wise kernels in this directory (their launches: row_launch.h).
//
// A row of N values (bf16 or fp32) is split over a cluster of kCluster CTAs (kCluster = 1: one
// CTA) of kThreads threads; each thread keeps kVecs 16-byte vectors of it in registers (8 bf16 or
// 4 fp32 each), so the row is read from DRAM exactly once. Vector slot i of thread t in CTA rank r
// covers vector index  r * kThreads * kVecs + i * kThreads + t  of the row: consecutive threads
// touch consecutive 16 B, so every warp access is 512 contiguous bytes.
//
// Reductions go thread -> warp (shuffles) -> CTA (one shared slot per warp, combined as a shuffle
// tree in every warp) -> cluster (the same over one slot per CTA). Across
// the cluster each CTA pushes its partial into a slot of every peer with st.async, and an mbarrier
// in each CTA completes when all kCluster partials have landed there. So the cluster costs one
// round of remote stores and a local wait, not a cluster-wide barrier in the middle of the row: the
// only cluster barrier (peers' mbarriers are initialised) is armed at kernel start and waited on
// only after the row's loads and the local reduction, when it has long completed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace rowwise {

// Kernels ask ptxas for at least this many resident threads per SM (__launch_bounds__ min blocks),
// which caps them at 64 registers: 1024 threads x 8 vectors x 16 B = 128 KB of loads in flight per
// SM, and two or more CTAs per SM, so one CTA's reduction overlaps another's loads.
constexpr int kMinResidentThreads = 1024;

// ---- 16-byte vectors ------------------------------------------------------------------------

template <class T>
constexpr int kElems = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte vector: 8 bf16, 4 fp32

template <class T>
__device__ __forceinline__ void unpack(const uint4& raw, float (&f)[kElems<T>]);

template <>
__device__ __forceinline__ void unpack<__nv_bfloat16>(const uint4& raw, float (&f)[8]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 two = __bfloat1622float2(pairs[k]);
    f[2 * k] = two.x;
    f[2 * k + 1] = two.y;
  }
}

template <>
__device__ __forceinline__ void unpack<float>(const uint4& raw, float (&f)[4]) {
  f[0] = __uint_as_float(raw.x);
  f[1] = __uint_as_float(raw.y);
  f[2] = __uint_as_float(raw.z);
  f[3] = __uint_as_float(raw.w);
}

template <class T>
__device__ __forceinline__ uint4 pack(const float (&f)[kElems<T>]);

template <>
__device__ __forceinline__ uint4 pack<__nv_bfloat16>(const float (&f)[8]) {
  uint4 raw;
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) pairs[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  return raw;
}

template <>
__device__ __forceinline__ uint4 pack<float>(const float (&f)[4]) {
  return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
}

// Every element is touched once. Plain 16-byte loads and stores: on our H200 the evict-first hints
// (__ldcs / __stcs) were 2-4% slower on 1 GiB rows at every N we timed (2026-11-30). A kernel that
// defines ROWWISE_EVICT_FIRST before including this header gets the hints.
#ifdef ROWWISE_EVICT_FIRST
__device__ __forceinline__ uint4 load_stream(const uint4* p) { return __ldcs(p); }
__device__ __forceinline__ void store_stream(uint4* p, const uint4& v) { __stcs(p, v); }
#else
__device__ __forceinline__ uint4 load_stream(const uint4* p) { return *p; }
__device__ __forceinline__ void store_stream(uint4* p, const uint4& v) { *p = v; }
#endif

// ---- the small value types the reductions carry ----------------------------------------------

__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
__device__ __forceinline__ float2 shfl_xor(float2 v, int lane_mask) {
  return make_float2(shfl_xor(v.x, lane_mask), shfl_xor(v.y, lane_mask));
}
__device__ __forceinline__ float3 shfl_xor(float3 v, int lane_mask) {
  return make_float3(shfl_xor(v.x, lane_mask), shfl_xor(v.y, lane_mask), shfl_xor(v.z, lane_mask));
}
__device__ __forceinline__ float from_lane0(float v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ float2 from_lane0(float2 v) { return make_float2(from_lane0(v.x), from_lane0(v.y)); }
__device__ __forceinline__ float3 from_lane0(float3 v) {
  return make_float3(from_lane0(v.x), from_lane0(v.y), from_lane0(v.z));
}

// Combine the kParts values part(0..kParts-1) (kParts a power of two, at most 32) in every warp as a
// butterfly over the lanes, and hand every lane lane 0's result: every warp combines in the same
// order, so every thread gets the same value, bit for bit, in log2(kParts) steps.
template <int kParts, class T, class Combine, class Part>
__device__ __forceinline__ T combine_parts(Combine combine, Part part) {
  static_assert(kParts >= 1 && kParts <= 32 && (kParts & (kParts - 1)) == 0, "a power of two, at most 32");
  T v = part(static_cast<int>(threadIdx.x % 32) % kParts);
#pragma unroll
  for (int mask = kParts / 2; mask > 0; mask >>= 1) v = combine(v, shfl_xor(v, mask));
  return from_lane0(v);
}

// A partial travels between CTAs as one 16-byte slot.
__device__ __forceinline__ float4 to_slot(float v) { return make_float4(v, 0.f, 0.f, 0.f); }
__device__ __forceinline__ float4 to_slot(float2 v) { return make_float4(v.x, v.y, 0.f, 0.f); }
__device__ __forceinline__ float4 to_slot(float3 v) { return make_float4(v.x, v.y, v.z, 0.f); }
__device__ __forceinline__ void from_slot(const float4& s, float& v) { v = s.x; }
__device__ __forceinline__ void from_slot(const float4& s, float2& v) { v = make_float2(s.x, s.y); }
__device__ __forceinline__ void from_slot(const float4& s, float3& v) { v = make_float3(s.x, s.y, s.z); }

// ---- cluster barrier, mbarrier and remote stores (sm_90) -------------------------------------

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The partials of one row: slot r holds rank r's partial; the mbarrier completes when all have landed.
// A kernel that loops over rows (persistent CTAs) takes kStages = 2 and passes the row's iteration
// number: consecutive rows alternate between two sets of slots and barriers, so a peer already
// pushing row i + 1 never overwrites the partials of row i that this CTA may still be reading.
template <int kCluster, int kStages = 1>
struct ClusterSlots {
  alignas(16) float4 slot[kStages][kCluster];
  alignas(8) uint64_t landed[kStages];
};

// Every thread, at kernel start: initialise this CTA's mbarriers (one arrival each, plus the bytes the
// peers will push) and arm the cluster barrier that tells the peers they are initialised.
template <int kCluster, int kStages>
__device__ __forceinline__ void cluster_slots_init(ClusterSlots<kCluster, kStages>& s) {
  if constexpr (kCluster > 1) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int stage = 0; stage < kStages; ++stage) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_address(&s.landed[stage])) : "memory");
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  }
}

// All-reduce `v` over the row: every thread of every CTA of the cluster returns the same value,
// bit for bit (all of them combine the partials in the same order). Every thread calls it once per
// row, after cluster_slots_init(slots); `iteration` counts the rows this CTA has reduced before
// (0, 1, 2, ...; always 0 in a kernel that reduces one row).
template <int kThreads, int kCluster, int kStages, class T, class Combine>
__device__ __forceinline__ T row_allreduce(T v, Combine combine, ClusterSlots<kCluster, kStages>& slots,
                                           int iteration = 0) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(kCluster >= 1 && kCluster <= 16, "clusters of at most 16 CTAs");
  static_assert(kStages == 1 || kStages == 2, "one row per kernel, or alternating slots for a loop over rows");
  constexpr int kWarps = kThreads / 32;
  // Two sets: a warp may write row i + 1's partial while a slower one still reads row i's.
  __shared__ T warp_partials[2][kWarps];
  const int buffer = iteration & 1;

#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) v = combine(v, shfl_xor(v, mask));

  if constexpr (kWarps > 1) {
    if (threadIdx.x % 32 == 0) warp_partials[buffer][threadIdx.x / 32] = v;
    __syncthreads();
    v = combine_parts<kWarps, T>(combine, [&](int w) { return warp_partials[buffer][w]; });
  }

  if constexpr (kCluster > 1) {
    const int stage = kStages == 1 ? 0 : iteration & 1;
    const uint32_t parity = static_cast<uint32_t>(iteration / kStages) & 1u;
    const uint32_t landed = smem_address(&slots.landed[stage]);
    if (iteration == 0) {
      asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // every peer's mbarrier is initialised
    }
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(landed),
                   "r"(kCluster * 16)
                   : "memory");
    }
    if (threadIdx.x < kCluster) {  // thread r pushes this CTA's partial into slot [my rank] of CTA r
      const uint32_t rank = __clusterRelativeBlockRank();
      const float4 s = to_slot(v);
      uint32_t remote_slot, remote_bar;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
                   : "=r"(remote_slot)
                   : "r"(smem_address(&slots.slot[stage][rank])), "r"(threadIdx.x));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote_bar) : "r"(landed), "r"(threadIdx.x));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                       remote_slot),
                   "f"(s.x), "f"(s.y), "f"(s.z), "f"(s.w), "r"(remote_bar)
                   : "memory");
    }
    uint32_t done = 0;
    do {
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
          " selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(landed), "r"(parity)
          : "memory");
    } while (!done);
    v = combine_parts<kCluster, T>(combine, [&](int rank) {
      T peer;
      from_slot(slots.slot[stage][rank], peer);
      return peer;
    });
  }
  return v;
}

// Where this CTA's slice of the row starts, in 16-byte vectors.
template <int kThreads, int kVecs, int kCluster>
__device__ __forceinline__ int slice_first_vector() {
  if constexpr (kCluster == 1) {
    return 0;
  } else {
    return static_cast<int>(__clusterRelativeBlockRank()) * kThreads * kVecs;
  }
}

// The row this CTA works on (all CTAs of a cluster share one row).
template <int kCluster>
__device__ __forceinline__ int64_t cta_row() {
  return static_cast<int64_t>(blockIdx.x) / kCluster;
}

}  // namespace rowwise
