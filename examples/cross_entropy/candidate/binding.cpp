// Python binding of cross_entropy.cu: checks the tensors, picks the row kernel's CTA size and the current stream,
// launches both kernels. Host code only (kernelpilot/launch.h): an edit of cross_entropy.cu recompiles device code
// alone.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <kernelpilot/launch.h>

#include "cross_entropy.h"

namespace {

constexpr int kMeanCtas = 8;        // the mean: one cluster of 8 CTAs (mean_loss's __cluster_dims__)
constexpr int kMeanThreads = 1024;  // of 1024 threads

template <class T, int kThreads>
cudaError_t launch_rows(const T* logits, const int64_t* targets, float* loss, int64_t rows, int64_t n_cols,
                        int64_t ignore_index, cudaStream_t stream) {
  const kp::Config c{dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream};
  return kp::launch(c, row_losses<T, kThreads>, logits, targets, loss, n_cols, ignore_index);
}

// out[0] = mean cross-entropy of logits [rows, n_cols] against targets [rows]; row_loss is an fp32 scratch
// buffer of `rows` elements. Needs n_cols a multiple of 8 (bf16) or 4 (fp32) and 16-byte aligned logits (the
// caller checks); returns cudaErrorInvalidValue for sizes a launch cannot take.
template <class T>
cudaError_t cross_entropy_mean(const void* logits, const int64_t* targets, float* row_loss, float* out, int64_t rows,
                               int64_t n_cols, int64_t ignore_index, cudaStream_t stream) {
  constexpr int64_t per_vec = 16 / sizeof(T);
  if (n_cols <= 0 || n_cols % per_vec != 0 || n_cols / per_vec > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows <= 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  const auto* x = static_cast<const T*>(logits);
  cudaError_t status;
  // About 4 vectors per thread per step, and at least 2048 threads' worth of loads per SM.
  const int64_t n_vecs = n_cols / per_vec;
  if (n_vecs <= 512) {
    status = launch_rows<T, 128>(x, targets, row_loss, rows, n_cols, ignore_index, stream);
  } else if (n_vecs <= 2048) {
    status = launch_rows<T, 256>(x, targets, row_loss, rows, n_cols, ignore_index, stream);
  } else if (n_vecs <= 8192) {
    status = launch_rows<T, 512>(x, targets, row_loss, rows, n_cols, ignore_index, stream);
  } else {
    status = launch_rows<T, 1024>(x, targets, row_loss, rows, n_cols, ignore_index, stream);
  }
  if (status != cudaSuccess) return status;
  const kp::Config mean{dim3(kMeanCtas), dim3(kMeanThreads), 0, stream};  // the cluster shape is mean_loss's own
  return kp::launch(mean, mean_loss<kMeanCtas, kMeanThreads>, row_loss, targets, out, rows, ignore_index);
}

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
  const auto launcher = bf16 ? cross_entropy_mean<__nv_bfloat16> : cross_entropy_mean<float>;
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
