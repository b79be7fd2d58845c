// Python binding for gemm_bias_gelu.cu: checks the tensors, allocates cuBLASLt's workspace from
// PyTorch's caching allocator, calls the launcher on the current stream.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

extern "C" int gemm_bias_gelu_last_cublas_status();
extern "C" cudaError_t gemm_bias_gelu_bf16(const void* x, const void* w, const void* bias, void* y, int64_t m,
                                           int64_t n, int64_t k, void* workspace, size_t workspace_bytes,
                                           cudaStream_t stream);

namespace {

constexpr int64_t kWorkspaceBytes = 32 << 20;  // what cuBLAS itself asks for on Hopper

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// gelu_tanh(x @ weight.T + bias) over the last dimension of x.
torch::Tensor gemm_bias_gelu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && x.device() == weight.device() &&
                  x.device() == bias.device(),
              "gemm_bias_gelu: x, weight and bias must be CUDA tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
                  bias.scalar_type() == at::kBFloat16,
              "gemm_bias_gelu: x, weight and bias must be bfloat16");
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && bias.dim() == 1, "gemm_bias_gelu: need x [..., in], weight "
              "[out, in] and bias [out]");
  const int64_t k = x.size(-1), n = weight.size(0);
  TORCH_CHECK(weight.size(1) == k && bias.size(0) == n, "gemm_bias_gelu: shapes do not match: x ", x.sizes(),
              ", weight ", weight.sizes(), ", bias ", bias.sizes());
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
              "gemm_bias_gelu: tensors must be contiguous");
  TORCH_CHECK(k % 8 == 0 && n % 8 == 0 && aligned16(x) && aligned16(weight) && aligned16(bias),
              "gemm_bias_gelu: in and out features must be multiples of 8 and tensors 16-byte aligned");

  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape.back() = n;
  torch::Tensor y = torch::empty(out_shape, x.options());
  const int64_t m = x.numel() / k;
  if (m == 0) return y;
  const c10::cuda::CUDAGuard device_guard(x.device());
  torch::Tensor workspace = torch::empty({kWorkspaceBytes}, x.options().dtype(at::kByte));
  const cudaError_t status = gemm_bias_gelu_bf16(x.data_ptr(), weight.data_ptr(), bias.data_ptr(), y.data_ptr(), m, n,
                                                 k, workspace.data_ptr(), static_cast<size_t>(kWorkspaceBytes),
                                                 c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "gemm_bias_gelu: failed: ", cudaGetErrorString(status), " (cublasStatus ",
              gemm_bias_gelu_last_cublas_status(), ")");
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gemm_bias_gelu", &gemm_bias_gelu, "gelu_tanh(x @ weight.T + bias) with cuBLASLt's GELU_BIAS epilogue (bf16)");
}
