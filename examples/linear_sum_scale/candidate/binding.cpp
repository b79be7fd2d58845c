// Python binding of linear_sum.cu: checks the tensors, allocates the scratch, sizes the grids, launches the three
// kernels. Host code only (kernelpilot/launch.h): an edit of linear_sum.cu recompiles device code alone.
#include <torch/extension.h>

// c10's stream and guard headers need only the CUDA runtime; ATen/cuda/CUDAContext.h would also pull
// in the cuBLAS, cuSPARSE and cuSOLVER headers, which a minimal toolkit does not have.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <kernelpilot/launch.h>

#include "linear_sum.h"

namespace {

// The launch shapes (linear_sum.cu instantiates the kernels for them).
constexpr int kColVecs = 32;             // column pass: a CTA is 32 column vectors (128 columns) x 8 row lanes
constexpr int kRowLanes = 8;
constexpr int kTargetColumnCtas = 2048;  // about 2 waves of 8 CTAs per SM on 132 SMs
constexpr int kFoldColumns = 32;         // fold: a CTA is 32 columns x 8 split lanes
constexpr int kFoldLanes = 8;
constexpr int kDotThreads = 256;         // GEMV: 8 warps = 8 rows of x per CTA

// Size of the scratch buffer (floats) linear_sum_f32 needs for `in_features` columns.
int64_t linear_sum_scratch_floats(int64_t out_features, int64_t in_features) {
  const int64_t col_blocks = (in_features / 4 + kColVecs - 1) / kColVecs;
  int64_t splits = (kTargetColumnCtas + col_blocks - 1) / col_blocks;
  if (splits > out_features) splits = out_features;
  if (splits > 65535) splits = 65535;  // grid.y limit
  if (splits < 1) splits = 1;
  return splits * in_features + in_features;  // partials, then v
}

// out[b] = scale / 2 * sum_j (x @ w.T)[b, j] for x [batch, in], w [out, in] (contiguous fp32, 16-byte
// aligned, in % 4 == 0); scratch holds linear_sum_scratch_floats(out, in) floats.
cudaError_t linear_sum_f32(const float* x, const float* w, float* out, float* scratch, int64_t batch,
                           int64_t in_features, int64_t out_features, float scale, cudaStream_t stream) {
  if (in_features <= 0 || in_features % 4 != 0 || out_features <= 0 || batch < 0) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  const int64_t vecs = in_features / 4;
  const int64_t col_blocks = (vecs + kColVecs - 1) / kColVecs;
  const int64_t scratch_floats = linear_sum_scratch_floats(out_features, in_features);
  const int64_t splits = (scratch_floats - in_features) / in_features;
  const int64_t rows_per_split = (out_features + splits - 1) / splits;
  float* partial = scratch;
  float* v = scratch + splits * in_features;
  if (col_blocks > 0x7fffffff || splits > 65535) return cudaErrorInvalidValue;

  const kp::Config columns{dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits)),
                           dim3(kColVecs * kRowLanes), 0, stream};
  cudaError_t status =
      kp::launch(columns, column_partials<kColVecs, kRowLanes>, reinterpret_cast<const float4*>(w),
                 reinterpret_cast<float4*>(partial), out_features, vecs, rows_per_split);
  if (status != cudaSuccess) return status;
  const kp::Config fold{dim3(static_cast<unsigned>((in_features + kFoldColumns - 1) / kFoldColumns)),
                        dim3(kFoldColumns * kFoldLanes), 0, stream};
  status = kp::launch(fold, fold_partials<kFoldColumns, kFoldLanes>, partial, v, in_features, static_cast<int>(splits),
                      0.5f * scale);
  if (status != cudaSuccess) return status;
  const int64_t dot_blocks = (batch + kDotThreads / 32 - 1) / (kDotThreads / 32);
  if (dot_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const kp::Config dot{dim3(static_cast<unsigned>(dot_blocks)), dim3(kDotThreads), 0, stream};
  return kp::launch(dot, row_dot<kDotThreads>, reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(v),
                    out, batch, vecs);
}

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
