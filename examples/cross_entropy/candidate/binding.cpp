// Python binding for cross_entropy.cu: checks the tensors, picks the current stream, calls the launcher.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

extern "C" cudaError_t cross_entropy_mean_bf16(const void* logits, const int64_t* targets, float* row_loss, float* out,
                                               int64_t rows, int64_t n_cols, int64_t ignore_index,
                                               cudaStream_t stream);
extern "C" cudaError_t cross_entropy_mean_f32(const void* logits, const int64_t* targets, float* row_loss, float* out,
                                              int64_t rows, int64_t n_cols, int64_t ignore_index,
                                              cudaStream_t stream);

namespace {

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, int64_t ignore_index) {
  TORCH_CHECK(logits.is_cuda() && targets.is_cuda() && logits.device() == targets.device(),
              "cross_entropy: logits and targets must be CUDA tensors on one device");
  const bool bf16 = logits.scalar_type() == at::kBFloat16;
  TORCH_CHECK(bf16 || logits.scalar_type() == at::kFloat, "cross_entropy: logits must be bfloat16 or float32, got ",
              logits.scalar_type());
  TORCH_CHECK(targets.scalar_type() == at::kLong, "cross_entropy: targets must be int64, got ", targets.scalar_type());
  TORCH_CHECK(logits.dim() == 2 && logits.is_contiguous(), "cross_entropy: logits must be contiguous [rows, classes]");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0) && targets.is_contiguous(),
              "cross_entropy: targets must be contiguous [rows]");
  const int64_t rows = logits.size(0), n_cols = logits.size(1);
  const int64_t per_vec = 16 / static_cast<int64_t>(logits.element_size());
  TORCH_CHECK(n_cols % per_vec == 0, "cross_entropy: the number of classes must be a multiple of ", per_vec, " for ",
              logits.scalar_type(), ", got ", n_cols);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(logits.data_ptr()) % 16 == 0, "cross_entropy: logits must be 16-byte aligned");

  torch::Tensor out = torch::empty({}, logits.options().dtype(at::kFloat));
  if (rows == 0) return out.fill_(std::numeric_limits<float>::quiet_NaN());  // mean of nothing, as in PyTorch
  torch::Tensor row_loss = torch::empty({rows}, logits.options().dtype(at::kFloat));
  const c10::cuda::CUDAGuard device_guard(logits.device());
  const auto launcher = bf16 ? cross_entropy_mean_bf16 : cross_entropy_mean_f32;
  const cudaError_t status = launcher(logits.data_ptr(), targets.data_ptr<int64_t>(), row_loss.data_ptr<float>(),
                                      out.data_ptr<float>(), rows, n_cols, ignore_index,
                                      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "cross_entropy: launch failed: ", cudaGetErrorString(status));
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("cross_entropy", &cross_entropy, "mean cross-entropy of bf16 or fp32 logits against int64 targets (fp32 result)",
        py::arg("logits"), py::arg("targets"), py::arg("ignore_index") = -100);
}
