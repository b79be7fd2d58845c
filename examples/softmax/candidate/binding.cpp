// Python binding of softmax.cu: checks the tensor, picks the launch shape and the current stream, launches.
// Host code only (kernelpilot/launch.h): an edit of softmax.cu or row_reduce.cuh recompiles device code alone.
// Only the torch headers it uses: torch/extension.h would parse all of libtorch (a 2-3x slower first
// build). c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also
// pull in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>  // PYBIND11_MODULE and the at::Tensor <-> torch.Tensor caster

#include "row_launch.h"
#include "softmax.h"

namespace {

template <class T>
struct SoftmaxLaunch {
  const T* x;
  T* y;
  int64_t rows, n_cols;
  cudaStream_t stream;

  template <int kThreads, int kVecs, int kCluster>
  cudaError_t operator()() const {
    return rowwise::launch_rows<kThreads, kCluster>(softmax_rows<T, kThreads, kVecs, kCluster>, rows, stream, x, y,
                                                    n_cols);
  }
};

template <class T>
cudaError_t launch_softmax(const at::Tensor& x, at::Tensor& y, int64_t n_cols) {
  constexpr int64_t per_vec = 16 / sizeof(T);
  const SoftmaxLaunch<T> launch{static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                                x.numel() / n_cols, n_cols, c10::cuda::getCurrentCUDAStream()};
  return rowwise::dispatch_row_shape(n_cols / per_vec, launch);
}

at::Tensor softmax_last_dim(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax: x must be a CUDA tensor");
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  TORCH_CHECK(bf16 || x.scalar_type() == at::kFloat, "softmax: x must be bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous(), "softmax: x must be contiguous with at least one dimension");
  const int64_t n_cols = x.size(-1), per_vec = 16 / static_cast<int64_t>(x.element_size());
  TORCH_CHECK(n_cols > 0 && n_cols % per_vec == 0 && n_cols <= rowwise::kMaxVecs * per_vec,
              "softmax: the last dimension must be a positive multiple of ", per_vec, " and at most ",
              rowwise::kMaxVecs * per_vec, " for ", x.scalar_type(), ", got ", n_cols);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "softmax: x must be 16-byte aligned");

  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaError_t status = bf16 ? launch_softmax<__nv_bfloat16>(x, y, n_cols) : launch_softmax<float>(x, y, n_cols);
  TORCH_CHECK(status == cudaSuccess, "softmax: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("softmax", &softmax_last_dim, "softmax over the last dimension (bf16 or fp32 in/out, fp32 math)");
}
