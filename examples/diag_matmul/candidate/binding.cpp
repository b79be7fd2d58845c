// Python binding for row_scale.cu: checks the tensors, picks the current stream, calls the launcher.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

extern "C" cudaError_t diag_matmul_f32(const float* a, const float* b, float* out, int64_t rows, int64_t cols,
                                       cudaStream_t stream);

namespace {

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
