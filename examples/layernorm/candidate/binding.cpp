// Python binding of layernorm.cu: checks the tensors, picks the launch shape and the current stream, launches.
// Host code only (kernelpilot/launch.h): an edit of layernorm.cu or row_reduce.cuh recompiles device code alone.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "layernorm.h"
#include "row_launch.h"

namespace {

template <class T>
struct LayerNormLaunch {
  const T* x;
  const T* weight;
  const T* bias;
  T* y;
  int64_t rows, n_cols;
  float eps;
  cudaStream_t stream;

  template <int kThreads, int kVecs, int kCluster>
  cudaError_t operator()() const {
    if constexpr (sizeof(T) == 4 && kThreads == 256 && kVecs == 8 && kCluster == 1) {
      // fp32 at 8 vectors per thread in one CTA spills in the output pass (weight and bias take 4
      // registers per vector each there): the same slice as 512 threads x 4 vectors.
      return rowwise::launch_rows<512, 1>(layernorm_rows<T, 512, 4, 1>, rows, stream, x, weight, bias, y, n_cols,
                                          eps);
    } else {
      return rowwise::launch_rows<kThreads, kCluster>(layernorm_rows<T, kThreads, kVecs, kCluster>, rows, stream, x,
                                                      weight, bias, y, n_cols, eps);
    }
  }
};

template <class T>
cudaError_t launch_layernorm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             torch::Tensor& y, int64_t n_cols, float eps) {
  constexpr int64_t per_vec = 16 / sizeof(T);
  const LayerNormLaunch<T> launch{static_cast<const T*>(x.data_ptr()), static_cast<const T*>(weight.data_ptr()),
                                  static_cast<const T*>(bias.data_ptr()), static_cast<T*>(y.data_ptr()),
                                  x.numel() / n_cols, n_cols, eps, c10::cuda::getCurrentCUDAStream()};
  return rowwise::dispatch_row_shape(n_cols / per_vec, launch);
}

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

void check_param(const torch::Tensor& p, const torch::Tensor& x, const char* name) {
  TORCH_CHECK(p.is_cuda() && p.device() == x.device(), "layernorm: ", name, " must be on x's device");
  TORCH_CHECK(p.scalar_type() == x.scalar_type(), "layernorm: ", name, " must be ", x.scalar_type(), " like x");
  TORCH_CHECK(p.dim() == 1 && p.size(0) == x.size(-1) && p.is_contiguous(), "layernorm: ", name,
              " must be contiguous with shape [", x.size(-1), "]");
  TORCH_CHECK(aligned16(p), "layernorm: ", name, " must be 16-byte aligned");
}

torch::Tensor layernorm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  TORCH_CHECK(x.is_cuda(), "layernorm: x must be a CUDA tensor");
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  TORCH_CHECK(bf16 || x.scalar_type() == at::kFloat, "layernorm: x must be bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous(), "layernorm: x must be contiguous");
  const int64_t n_cols = x.size(-1), per_vec = 16 / static_cast<int64_t>(x.element_size());
  TORCH_CHECK(n_cols % per_vec == 0 && n_cols <= rowwise::kMaxVecs * per_vec,
              "layernorm: the last dimension must be a multiple of ", per_vec, " and at most ",
              rowwise::kMaxVecs * per_vec, " for ", x.scalar_type(), ", got ", n_cols);
  TORCH_CHECK(aligned16(x), "layernorm: x must be 16-byte aligned");
  check_param(weight, x, "weight");
  check_param(bias, x, "bias");

  torch::Tensor y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  const c10::cuda::CUDAGuard device_guard(x.device());
  const float eps_f = static_cast<float>(eps);
  const cudaError_t status = bf16 ? launch_layernorm<__nv_bfloat16>(x, weight, bias, y, n_cols, eps_f)
                                  : launch_layernorm<float>(x, weight, bias, y, n_cols, eps_f);
  TORCH_CHECK(status == cudaSuccess, "layernorm: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("layernorm", &layernorm, "LayerNorm over the last dimension with weight and bias (bf16 or fp32 in/out, fp32 math)");
}
