// Python binding for softmax.cu: checks the tensor, picks the current stream, calls the launcher.
// Only the torch headers it uses: torch/extension.h would parse all of libtorch (a 2-3x slower first
// build). c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also
// pull in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>  // PYBIND11_MODULE and the at::Tensor <-> torch.Tensor caster

extern "C" cudaError_t softmax_bf16(const void* x, void* y, int64_t rows, int64_t n_cols, cudaStream_t stream);
extern "C" cudaError_t softmax_f32(const void* x, void* y, int64_t rows, int64_t n_cols, cudaStream_t stream);

namespace {

constexpr int64_t kMaxVecs = 65536;  // rowwise::kMaxVecs in row_reduce.cuh: 16-byte vectors per row

at::Tensor softmax_last_dim(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax: x must be a CUDA tensor");
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  TORCH_CHECK(bf16 || x.scalar_type() == at::kFloat, "softmax: x must be bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous(), "softmax: x must be contiguous with at least one dimension");
  const int64_t n_cols = x.size(-1), per_vec = 16 / static_cast<int64_t>(x.element_size());
  TORCH_CHECK(n_cols % per_vec == 0 && n_cols <= kMaxVecs * per_vec, "softmax: the last dimension must be a multiple of ",
              per_vec, " and at most ", kMaxVecs * per_vec, " for ", x.scalar_type(), ", got ", n_cols);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "softmax: x must be 16-byte aligned");

  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaError_t status = (bf16 ? softmax_bf16 : softmax_f32)(x.data_ptr(), y.data_ptr(), x.numel() / n_cols,
                                                                 n_cols, c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "softmax: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("softmax", &softmax_last_dim, "softmax over the last dimension (bf16 or fp32 in/out, fp32 math)");
}
