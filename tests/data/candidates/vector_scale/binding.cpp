// Torch glue for kernel.cu: checks tensors, takes the current stream, calls the launcher. Only the torch
// headers it uses, as the skills teach: torch/extension.h would parse all of libtorch.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <torch/csrc/utils/pybind.h>  // PYBIND11_MODULE and the at::Tensor <-> torch.Tensor caster

extern "C" int kp_scale_launch(const float* x, float* y, float alpha, long n, cudaStream_t stream);

at::Tensor scale(const at::Tensor& x, double alpha) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto y = at::empty_like(x);
    const int err = kp_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(alpha),
                                    x.numel(), c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == 0, "scale kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("scale", &scale, "y = alpha * x (CUDA)");
}
