// Python binding for linear_sum.cu: checks the tensors, allocates the scratch, calls the launcher.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

extern "C" int64_t linear_sum_scratch_floats(int64_t out_features, int64_t in_features);
extern "C" cudaError_t linear_sum_f32(const float* x, const float* w, float* out, float* scratch, int64_t batch,
                                      int64_t in_features, int64_t out_features, float scale, cudaStream_t stream);

namespace {

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// scale / 2 * (x @ weight.T).sum(1, keepdim=True), computed as x @ (weight.sum(0) * scale / 2).
torch::Tensor linear_sum(const torch::Tensor& x, const torch::Tensor& weight, double scale) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && x.device() == weight.device(),
              "linear_sum: x and weight must be CUDA tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat, "linear_sum: x and weight must be float32");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "linear_sum: need x [batch, in] and weight [out, in], got ", x.sizes(), " and ", weight.sizes());
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && aligned16(x) && aligned16(weight),
              "linear_sum: x and weight must be contiguous and 16-byte aligned");
  const int64_t in_features = x.size(1), out_features = weight.size(0);
  TORCH_CHECK(in_features % 4 == 0 && out_features > 0, "linear_sum: in_features must be a multiple of 4 and "
              "out_features positive, got ", in_features, " and ", out_features);

  torch::Tensor out = torch::empty({x.size(0), 1}, x.options());
  if (x.size(0) == 0) return out;
  torch::Tensor scratch = torch::empty({linear_sum_scratch_floats(out_features, in_features)}, x.options());
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaError_t status = linear_sum_f32(x.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(),
                                            scratch.data_ptr<float>(), x.size(0), in_features, out_features,
                                            static_cast<float>(scale), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status == cudaSuccess, "linear_sum: launch failed: ", cudaGetErrorString(status));
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_sum", &linear_sum, "scale/2 * (x @ weight.T).sum(1, keepdim=True) as a column sum plus a GEMV (fp32)");
}
