// How binding.cpp launches the row-wise kernels of this directory (their device code: row_reduce.cuh).
// Host code only, built once: a kernel edit recompiles the .cu files alone (kernelpilot/launch.h).
#pragma once

#include <kernelpilot/launch.h>
#include <stdint.h>

namespace rowwise {

// Past the portable 8 CTAs a cluster needs the kernel's permission.
template <int kCluster, class... Params>
cudaError_t allow_cluster(void (*kernel)(Params...)) {
  if constexpr (kCluster > 8) return kp::set_attribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  return cudaSuccess;
}

// Launch `kernel` with one cluster of kCluster CTAs of kThreads threads per row.
template <int kThreads, int kCluster, class... Params, class... Args>
cudaError_t launch_rows(void (*kernel)(Params...), int64_t rows, cudaStream_t stream, Args... args) {
  if (rows == 0) return cudaSuccess;
  if (rows * kCluster > 0x7fffffffLL) return cudaErrorInvalidValue;
  const cudaError_t allowed = allow_cluster<kCluster>(kernel);
  if (allowed != cudaSuccess) return allowed;
  const kp::Config launch(dim3(static_cast<unsigned>(rows * kCluster)), dim3(kThreads), 0, stream,
                          kCluster > 1 ? kCluster : 0);
  return kp::launch(launch, kernel, args...);
}

// Launch `kernel` as persistent clusters of kCluster CTAs that loop over the rows (row = cluster index,
// + number of clusters, ...): as many clusters as fit on the GPU at once with `smem_bytes` of dynamic
// shared memory each, at most one per row. Each CTA keeps its slice of the columns for every row, so
// data that is the same for every row (a norm's weight) can be staged once per CTA.
template <int kThreads, int kCluster, class... Params, class... Args>
cudaError_t launch_persistent(void (*kernel)(Params...), int64_t rows, size_t smem_bytes, cudaStream_t stream,
                              Args... args) {
  if (rows == 0) return cudaSuccess;
  cudaError_t status =
      kp::set_attribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  if (status != cudaSuccess) return status;
  status = allow_cluster<kCluster>(kernel);
  if (status != cudaSuccess) return status;
  int clusters = 0;
  {
    const kp::Config one{dim3(kCluster), dim3(kThreads), smem_bytes, stream, kCluster};  // how many fit at once
    status = kp::max_active_clusters(&clusters, kernel, one);
  }
  if (status != cudaSuccess) return status;
  if (clusters <= 0) return cudaErrorInvalidConfiguration;  // not even one cluster fits
  const int64_t groups = rows < clusters ? rows : clusters;
  const kp::Config launch{dim3(static_cast<unsigned>(groups * kCluster)), dim3(kThreads), smem_bytes, stream, kCluster};
  return kp::launch(launch, kernel, args...);
}

// The launch shape for a row of n_vecs 16-byte vectors (N / 8 for bf16, N / 4 for fp32): each thread
// holds at most 8 vectors (32 registers), and rows longer than one CTA's share are split over a
// cluster. Vectors per row:
//   <=  128: 128 threads x 1 vector           <=  4096: cluster 2 x 256 threads x 8
//   <=  256: 128 x 2                          <=  8192: cluster 4 x 256 x 8
//   <=  512: 128 x 4                          <= 16384: cluster 8 x 256 x 8
//   <= 1024: 256 x 4                          <= 32768: cluster 16 x 256 x 8
//   <= 2048: 256 x 8                          <= 65536: cluster 16 x 512 x 8
// (bf16: N <= 16384 in one CTA, N = 262144 over 16 CTAs of 256 threads; fp32: half those N.)
// A .cu file instantiates the kernels binding.cpp launches for these shapes (its explicit instantiations).
constexpr int64_t kMaxVecs = 65536;

// Calls launch.template operator()<kThreads, kVecs, kCluster>() for the shape that fits n_vecs.
template <class Launch>
cudaError_t dispatch_row_shape(int64_t n_vecs, Launch&& launch) {
  if (n_vecs <= 0 || n_vecs > kMaxVecs) return cudaErrorInvalidValue;
  if (n_vecs <= 128) return launch.template operator()<128, 1, 1>();
  if (n_vecs <= 256) return launch.template operator()<128, 2, 1>();
  if (n_vecs <= 512) return launch.template operator()<128, 4, 1>();
  if (n_vecs <= 1024) return launch.template operator()<256, 4, 1>();
  if (n_vecs <= 2048) return launch.template operator()<256, 8, 1>();
  if (n_vecs <= 4096) return launch.template operator()<256, 8, 2>();
  if (n_vecs <= 8192) return launch.template operator()<256, 8, 4>();
  if (n_vecs <= 16384) return launch.template operator()<256, 8, 8>();
  if (n_vecs <= 32768) return launch.template operator()<256, 8, 16>();
  return launch.template operator()<512, 8, 16>();
}

}  // namespace rowwise
