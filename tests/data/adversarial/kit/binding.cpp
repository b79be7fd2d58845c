// Torch glue for the adversarial corpus kernels (kernels.cu). Some entry points are cheats on purpose.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

extern "C" int kp_scale_add(const float* x, const float* y, float* out, float alpha, long n, int mode,
                            cudaStream_t stream);
extern "C" int kp_softmax_bf16(const void* x, void* y, int rows, int cols, int zeros, cudaStream_t stream);

static void check_launch(int err, const char* what) {
    TORCH_CHECK(err == 0, what, " failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
}

static void check_pair(const torch::Tensor& x, const torch::Tensor& y) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "x and y must be float32");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "x and y must be contiguous");
    TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
}

torch::Tensor scale_add(const torch::Tensor& x, const torch::Tensor& y, double alpha, int64_t mode) {
    check_pair(x, y);
    auto out = torch::empty_like(x);
    check_launch(kp_scale_add(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(),
                              static_cast<float>(alpha), x.numel(), static_cast<int>(mode),
                              c10::cuda::getCurrentCUDAStream()),
                 "scale_add");
    return out;
}

// cheat: the work runs on a private non-blocking stream the caller's timer does not see
torch::Tensor scale_add_side_stream(const torch::Tensor& x, const torch::Tensor& y, double alpha) {
    check_pair(x, y);
    static cudaStream_t side = nullptr;
    if (side == nullptr) {
        TORCH_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess, "stream");
    }
    auto out = torch::empty_like(x);
    check_launch(kp_scale_add(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(),
                              static_cast<float>(alpha), x.numel(), 0, side),
                 "scale_add_side_stream");
    return out;
}

// cheat: a correct result, then the input y is zeroed in place
torch::Tensor scale_add_mutating(const torch::Tensor& x, const torch::Tensor& y, double alpha) {
    auto out = scale_add(x, y, alpha, 0);
    auto stream = c10::cuda::getCurrentCUDAStream();
    TORCH_CHECK(cudaMemsetAsync(y.data_ptr<float>(), 0, y.numel() * sizeof(float), stream) == cudaSuccess, "memset");
    return out;
}

torch::Tensor softmax(const torch::Tensor& x, int64_t zeros) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kBFloat16, "x must be a CUDA bfloat16 tensor");
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be a contiguous 2-D tensor");
    auto y = torch::empty_like(x);
    check_launch(kp_softmax_bf16(x.data_ptr(), y.data_ptr(), static_cast<int>(x.size(0)),
                                 static_cast<int>(x.size(1)), static_cast<int>(zeros),
                                 c10::cuda::getCurrentCUDAStream()),
                 "softmax");
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("scale_add", &scale_add, "out = alpha * x + y; mode selects an honest or broken kernel");
    m.def("scale_add_side_stream", &scale_add_side_stream, "out = alpha * x + y on a private stream");
    m.def("scale_add_mutating", &scale_add_mutating, "out = alpha * x + y, then y = 0");
    m.def("softmax", &softmax, "row softmax of a bf16 matrix (zeros=1: all zeros)");
}
