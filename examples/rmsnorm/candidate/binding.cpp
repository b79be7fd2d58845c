// Python binding of rmsnorm.cu: checks the tensors, picks the launch shape and the current stream, launches.
// Host code only (kernelpilot/launch.h): an edit of rmsnorm.cu or row_reduce.cuh recompiles device code alone.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "rmsnorm.h"
#include "row_launch.h"

namespace {

template <class T>
struct RmsNormLaunch {
  const T* x;
  const T* weight;
  T* y;
  int64_t rows, n_cols;
  float eps;
  cudaStream_t stream;

  template <int kThreads, int kVecs, int kCluster>
  cudaError_t operator()() const {
    if constexpr (kCluster == 16) {
      const size_t smem = sizeof(uint4) * kThreads * kVecs;  // this CTA's slice of the weight
      return rowwise::launch_persistent<kThreads, kCluster>(rmsnorm_rows<T, kThreads, kVecs, kCluster, true>, rows,
                                                            smem, stream, x, weight, y, rows, n_cols, eps);
    } else {
      return rowwise::launch_rows<kThreads, kCluster>(rmsnorm_rows<T, kThreads, kVecs, kCluster, false>, rows, stream,
                                                      x, weight, y, rows, n_cols, eps);
    }
  }
};

template <class T>
cudaError_t launch_rmsnorm(const torch::Tensor& x, const torch::Tensor& weight, torch::Tensor& y, int64_t n_cols,
                           float eps) {
  constexpr int64_t per_vec = 16 / sizeof(T);
  const RmsNormLaunch<T> launch{static_cast<const T*>(x.data_ptr()), static_cast<const T*>(weight.data_ptr()),
                                static_cast<T*>(y.data_ptr()), x.numel() / n_cols, n_cols, eps,
                                c10::cuda::getCurrentCUDAStream()};
  return rowwise::dispatch_row_shape(n_cols / per_vec, launch);
}

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rmsnorm: x and weight must be CUDA tensors");
  TORCH_CHECK(x.device() == weight.device(), "rmsnorm: x and weight must be on the same device");
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  TORCH_CHECK((bf16 || x.scalar_type() == at::kFloat) && weight.scalar_type() == x.scalar_type(),
              "rmsnorm: x and weight must both be bfloat16 or both float32, got ", x.scalar_type(), " and ",
              weight.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous() && weight.is_contiguous(), "rmsnorm: tensors must be contiguous");
  const int64_t n_cols = x.size(-1), per_vec = 16 / static_cast<int64_t>(x.element_size());
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n_cols, "rmsnorm: weight must have shape [", n_cols, "]");
  TORCH_CHECK(n_cols % per_vec == 0 && n_cols <= rowwise::kMaxVecs * per_vec,
              "rmsnorm: the last dimension must be a multiple of ", per_vec, " and at most ",
              rowwise::kMaxVecs * per_vec, " for ", x.scalar_type(), ", got ", n_cols);
  TORCH_CHECK(aligned16(x) && aligned16(weight), "rmsnorm: x and weight must be 16-byte aligned");

  torch::Tensor y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  const c10::cuda::CUDAGuard device_guard(x.device());
  const float eps_f = static_cast<float>(eps);
  const cudaError_t status = bf16 ? launch_rmsnorm<__nv_bfloat16>(x, weight, y, n_cols, eps_f)
                                  : launch_rmsnorm<float>(x, weight, y, n_cols, eps_f);
  TORCH_CHECK(status == cudaSuccess, "rmsnorm: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rmsnorm", &rmsnorm, "RMSNorm over the last dimension with a weight (bf16 or fp32 in/out, fp32 math)");
}
