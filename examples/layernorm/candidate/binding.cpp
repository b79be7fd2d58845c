// Python binding for layernorm.cu: checks the tensors, picks the current stream, calls the launcher.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

extern "C" cudaError_t layernorm_bf16(const void* x, const void* weight, const void* bias, void* y, int64_t rows,
                                      int64_t n_cols, float eps, cudaStream_t stream);
extern "C" cudaError_t layernorm_f32(const void* x, const void* weight, const void* bias, void* y, int64_t rows,
                                     int64_t n_cols, float eps, cudaStream_t stream);

namespace {

constexpr int64_t kMaxVecs = 65536;  // rowwise::kMaxVecs in row_reduce.cuh: 16-byte vectors per row

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
  TORCH_CHECK(n_cols % per_vec == 0 && n_cols <= kMaxVecs * per_vec, "layernorm: the last dimension must be a multiple of ",
              per_vec, " and at most ", kMaxVecs * per_vec, " for ", x.scalar_type(), ", got ", n_cols);
  TORCH_CHECK(aligned16(x), "layernorm: x must be 16-byte aligned");
  check_param(weight, x, "weight");
  check_param(bias, x, "bias");

  torch::Tensor y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  const c10::cuda::CUDAGuard device_guard(x.device());
  const auto launcher = bf16 ? layernorm_bf16 : layernorm_f32;
  const cudaError_t status = launcher(x.data_ptr(), weight.data_ptr(), bias.data_ptr(), y.data_ptr(), x.numel() / n_cols,
                                      n_cols, static_cast<float>(eps), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "layernorm: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("layernorm", &layernorm, "LayerNorm over the last dimension with weight and bias (bf16 or fp32 in/out, fp32 math)");
}
