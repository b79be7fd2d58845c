// Python binding of row_scale.cu: checks the tensors, picks the kernel and the current stream, launches.
// Host code only (kernelpilot/launch.h): an edit of row_scale.cu recompiles device code alone.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <kernelpilot/launch.h>

#include "row_scale.h"

namespace {

constexpr int kThreads = 256;  // one CTA per row (row_scale.cu instantiates both kernels for it)

// out[r, c] = a[r] * b[r, c] for a [rows], b and out [rows, cols] (contiguous fp32).
cudaError_t diag_matmul_f32(const float* a, const float* b, float* out, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  if (rows < 0 || cols < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  const bool aligned = reinterpret_cast<uintptr_t>(b) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const kp::Config c{dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream};
  if (aligned && cols % 4 == 0) {
    return kp::launch(c, scale_rows_vec4<kThreads>, a, reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(out),
                      cols / 4);
  }
  return kp::launch(c, scale_rows_scalar<kThreads>, a, b, out, cols);
}

// torch.diag(a) @ b without building diag(a).
torch::Tensor diag_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.device() == b.device(), "diag_matmul: a and b must be CUDA tensors on one device");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, "diag_matmul: a and b must be float32");
  TORCH_CHECK(a.dim() == 1 && b.dim() == 2 && b.size(0) == a.size(0), "diag_matmul: need a [N] and b [N, M], got ",
              a.sizes(), " and ", b.sizes());
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "diag_matmul: a and b must be contiguous");
  torch::Tensor out = torch::empty_like(b);
  const c10::cuda::CUDAGuard device_guard(b.device());
  const cudaError_t status = diag_matmul_f32(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), b.size(0),
                                             b.size(1), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "diag_matmul: launch failed: ", cudaGetErrorString(status));
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("diag_matmul", &diag_matmul, "torch.diag(a) @ b as a row scaling (fp32)");
}
