// kernelpilot/launch.h: launch a candidate's kernels from its host code (binding.cpp), so that a kernel edit
// rebuilds device code only.
//
// A native candidate keeps its kernels (device code only) in .cu files and its host logic (argument checks,
// dispatch, launch shapes, cluster attributes, occupancy) in binding.cpp, which launches every kernel
// through the functions below. In a plain build (torch.utils.cpp_extension, as in your repository after
// approval) they are the CUDA runtime's own calls on the kernel. Inside kernelpilot's evaluation worker, a
// kernel edit is compiled with `nvcc -cubin` (the plain build's flags) and loaded into the already built
// extension: each kernel is then replaced by the one of the same (mangled) name in the new code, and these
// functions launch, configure and query that one. Never call cudaLaunchKernel*, cudaFuncSetAttribute,
// cudaFuncGetAttributes or cudaOccupancy* on a kernel directly in binding.cpp, nor use <<<...>>> there: a
// direct call would reach the kernel of the last full build (kernelpilot then builds every edit in full).
//
//   #include <kernelpilot/launch.h>
//   template <class T, int kThreads> __global__ void scale(const T* x, T* y, int64_t n);  // defined in a .cu
//   ...
//   const kp::Config config{dim3(blocks), dim3(256), /*smem_bytes=*/0, stream};  // braces, not parentheses
//   cudaError_t status = kp::launch(config, scale<float, 256>, x, y, n);
//
// The .cu file instantiates every kernel the host launches, one explicit instantiation per line:
//   template __global__ void scale<float, 256>(const float*, float*, int64_t);
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kp {
namespace detail {

// The code loaded by kp_use_cubins, and the kernels of the full build found in it so far (by name, when each is
// first used): a kernel of this library stands for the kernel of the same mangled name in that code.
struct Replacements {
  std::mutex mutex;
  std::vector<cudaLibrary_t> libraries;
  std::unordered_map<const void*, const void*> found;
};

inline Replacements& replacements() {
  static Replacements* table = new Replacements();  // never destroyed: kernels may launch during exit
  return *table;
}

// nullptr when new code is loaded and has no kernel of this name (the launch then fails with
// cudaErrorInvalidDeviceFunction, as the full build would have failed to link).
inline const void* resolve(const void* kernel) {
  Replacements& r = replacements();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.libraries.empty()) return kernel;
  const auto hit = r.found.find(kernel);
  if (hit != r.found.end()) return hit->second;
  const char* name = nullptr;
  const void* replacement = nullptr;
  if (cudaFuncGetName(&name, kernel) == cudaSuccess && name != nullptr) {
    for (cudaLibrary_t library : r.libraries) {
      cudaKernel_t k = nullptr;
      if (cudaLibraryGetKernel(&k, library, name) == cudaSuccess) {
        replacement = reinterpret_cast<const void*>(k);
        break;
      }
    }
  }
  (void)cudaGetLastError();  // a lookup that found nothing is not an error of the next launch
  r.found.emplace(kernel, replacement);
  return replacement;
}

}  // namespace detail

// The handle the CUDA runtime calls take for `kernel`: the kernel itself, or its replacement.
template <class... Params>
const void* function(void (*kernel)(Params...)) {
  return detail::resolve(reinterpret_cast<const void*>(kernel));
}

// A launch configuration; `cluster` > 0 adds the cluster-dimension attribute (sm_90+): clusters of that many CTAs.
struct Config {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attributes[1] = {};

  Config(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream, unsigned cluster = 0) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = cluster;
    attributes[0].val.clusterDim.y = 1;
    attributes[0].val.clusterDim.z = 1;
    config.attrs = attributes;
    config.numAttrs = cluster > 0 ? 1 : 0;
  }
  Config(const Config&) = delete;  // config.attrs points into this object
  Config& operator=(const Config&) = delete;
};

// Launch `kernel` with `args`, each converted to the kernel's parameter type as a <<<...>>> launch would.
template <class... Params, class... Args>
cudaError_t launch(const Config& c, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kp::launch: the kernel takes a different number of arguments");
  return [&](Params... converted) {
    void* pointers[] = {static_cast<void*>(&converted)..., nullptr};
    return cudaLaunchKernelExC(&c.config, function(kernel), pointers);
  }(std::forward<Args>(args)...);
}

template <class... Params>
cudaError_t set_attribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  return cudaFuncSetAttribute(function(kernel), attribute, value);
}

template <class... Params>
cudaError_t attributes(cudaFuncAttributes* out, void (*kernel)(Params...)) {
  return cudaFuncGetAttributes(out, function(kernel));
}

template <class... Params>
cudaError_t max_active_blocks(int* blocks, void (*kernel)(Params...), int threads, size_t smem_bytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, function(kernel), threads, smem_bytes);
}

template <class... Params>
cudaError_t max_active_clusters(int* clusters, void (*kernel)(Params...), const Config& c) {
  return cudaOccupancyMaxActiveClusters(clusters, function(kernel), &c.config);
}

}  // namespace kp

// Called by kernelpilot's worker (through ctypes) after it imports the extension: load the cubins named in
// `paths` (a kernel edit compiled alone); from then on every kernel of this library is replaced by the kernel
// of the same mangled name in them. n == 0 puts back the kernels of the full build. Returns 0, or -1 with a
// message in `error` (the previous state is kept then).
extern "C" __attribute__((visibility("default"), weak)) int kp_use_cubins(const char* const* paths, int n,
                                                                         char* error, int error_bytes) {
  std::vector<cudaLibrary_t> loaded;
  for (int i = 0; i < n; ++i) {
    cudaLibrary_t library = nullptr;
    const cudaError_t status = cudaLibraryLoadFromFile(&library, paths[i], nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (status != cudaSuccess) {
      std::snprintf(error, static_cast<size_t>(error_bytes), "loading %s: %s", paths[i], cudaGetErrorString(status));
      for (cudaLibrary_t l : loaded) cudaLibraryUnload(l);
      return -1;
    }
    loaded.push_back(library);
  }
  kp::detail::Replacements& r = kp::detail::replacements();
  std::vector<cudaLibrary_t> previous;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    previous.swap(r.libraries);
    r.libraries = loaded;
    r.found.clear();
  }
  if (!previous.empty()) {
    (void)cudaDeviceSynchronize();  // no launch of the previous code may still run when it is unloaded
    for (cudaLibrary_t l : previous) cudaLibraryUnload(l);
  }
  return 0;
}
