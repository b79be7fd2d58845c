// Python binding for residual_rmsnorm_gate.cu: checks the tensors, picks the current stream, calls
// the launcher.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <tuple>

extern "C" cudaError_t residual_rmsnorm_gate_bf16(const void* x, const void* residual, const void* gate,
                                                  const void* weight, void* h, void* out, int64_t rows,
                                                  int64_t n_cols, float scale, float eps, cudaStream_t stream);

namespace {

constexpr int64_t kMaxCols = 262144;  // kMaxCols in residual_rmsnorm_gate.cu

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
  const cudaError_t status = residual_rmsnorm_gate_bf16(
      x.data_ptr(), residual.data_ptr(), gate.data_ptr(), weight.data_ptr(), h.data_ptr(), out.data_ptr(),
      x.numel() / n_cols, n_cols, static_cast<float>(scale), static_cast<float>(eps),
      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "residual_rmsnorm_gate: launch failed: ", cudaGetErrorString(status));
  return {h, out};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("residual_rmsnorm_gate", &residual_rmsnorm_gate,
        "h = x * scale + residual; out = rmsnorm(h) * weight * silu(gate) (bf16 in/out, fp32 math)");
}
