// Python binding of residual_rmsnorm_gate.cu: checks the tensors, picks the launch shape and the current
// stream, launches. Host code only (kernelpilot/launch.h): an edit of residual_rmsnorm_gate.cu or
// row_reduce.cuh recompiles device code alone.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <tuple>

#include "residual_rmsnorm_gate.h"
#include "row_launch.h"

namespace {

using bf16 = __nv_bfloat16;

struct Launch {
  const bf16 *x, *residual, *gate, *weight;
  bf16 *h, *out;
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
// residual_rmsnorm_gate.cu instantiates these nine shapes.
constexpr int64_t kMaxCols = 262144;

cudaError_t dispatch(const Launch& launch) {
  const int64_t n = launch.n_cols;
  if (n <= 0 || n % 8 != 0 || n > kMaxCols) return cudaErrorInvalidValue;  // 8 bf16 per 16-byte vector
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

void check_activation(const torch::Tensor& t, const torch::Tensor& x, const char* name) {
  TORCH_CHECK(t.is_cuda() && t.device() == x.device(), "residual_rmsnorm_gate: ", name, " must be on x's device");
  TORCH_CHECK(t.scalar_type() == at::kBFloat16, "residual_rmsnorm_gate: ", name, " must be bfloat16");
  TORCH_CHECK(t.sizes() == x.sizes() && t.is_contiguous(), "residual_rmsnorm_gate: ", name,
              " must be contiguous with x's shape");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, "residual_rmsnorm_gate: ", name,
              " must be 16-byte aligned");
}

std::tuple<torch::Tensor, torch::Tensor> residual_rmsnorm_gate(const torch::Tensor& x, const torch::Tensor& residual,
                                                               const torch::Tensor& gate, const torch::Tensor& weight,
                                                               double scale, double eps) {
  TORCH_CHECK(x.is_cuda() && x.dim() >= 1, "residual_rmsnorm_gate: x must be a CUDA tensor");
  check_activation(x, x, "x");
  check_activation(residual, x, "residual");
  check_activation(gate, x, "gate");
  const int64_t n_cols = x.size(-1);
  TORCH_CHECK(n_cols % 8 == 0 && n_cols <= kMaxCols, "residual_rmsnorm_gate: the last dimension must be a multiple "
              "of 8 and at most ", kMaxCols, ", got ", n_cols);
  TORCH_CHECK(weight.is_cuda() && weight.device() == x.device() && weight.scalar_type() == at::kBFloat16 &&
                  weight.dim() == 1 && weight.size(0) == n_cols && weight.is_contiguous() &&
                  reinterpret_cast<uintptr_t>(weight.data_ptr()) % 16 == 0,
              "residual_rmsnorm_gate: weight must be a contiguous, aligned bfloat16 CUDA tensor of shape [", n_cols,
              "]");

  torch::Tensor h = torch::empty_like(x);
  torch::Tensor out = torch::empty_like(x);
  if (x.numel() == 0) return {h, out};
  const c10::cuda::CUDAGuard device_guard(x.device());
  const Launch launch{static_cast<const bf16*>(x.data_ptr()),      static_cast<const bf16*>(residual.data_ptr()),
                      static_cast<const bf16*>(gate.data_ptr()),   static_cast<const bf16*>(weight.data_ptr()),
                      static_cast<bf16*>(h.data_ptr()),            static_cast<bf16*>(out.data_ptr()),
                      x.numel() / n_cols,                          n_cols,
                      static_cast<float>(scale),                   static_cast<float>(eps),
                      c10::cuda::getCurrentCUDAStream()};
  const cudaError_t status = dispatch(launch);
  TORCH_CHECK(status == cudaSuccess, "residual_rmsnorm_gate: launch failed: ", cudaGetErrorString(status));
  return {h, out};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("residual_rmsnorm_gate", &residual_rmsnorm_gate,
        "h = x * scale + residual; out = rmsnorm(h) * weight * silu(gate) (bf16 in/out, fp32 math)");
}
