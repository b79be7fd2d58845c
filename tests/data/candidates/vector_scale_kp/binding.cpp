// Torch glue for scale.cu: checks tensors, picks the block size, launches through kernelpilot/launch.h.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>

#include <kernelpilot/launch.h>

#include "scale.h"

template <int kThreads>
cudaError_t launch(const at::Tensor& x, at::Tensor& y, float alpha) {
    const long n = x.numel();
    const kp::Config config{dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads)), dim3(kThreads), 0,
                            c10::cuda::getCurrentCUDAStream()};
    return kp::launch(config, scale_kernel<kThreads>, x.data_ptr<float>(), y.data_ptr<float>(), alpha, n);
}

at::Tensor scale(const at::Tensor& x, double alpha) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: a contiguous float32 CUDA tensor");
    at::Tensor y = at::empty_like(x);
    if (x.numel() == 0) return y;
    const long n = x.numel();
    if (alpha == 0.0) {  // y = 0: the fill kernel
        const kp::Config config{dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0,
                                c10::cuda::getCurrentCUDAStream()};
        const cudaError_t err = kp::launch(config, fill_kernel, y.data_ptr<float>(), 0.f, n);
        TORCH_CHECK(err == cudaSuccess, "fill kernel launch failed: ", cudaGetErrorString(err));
        return y;
    }
    const cudaError_t err = n < (1 << 14) ? launch<128>(x, y, alpha) : n < (1 << 20) ? launch<256>(x, y, alpha)
                                                                                : launch<512>(x, y, alpha);
    TORCH_CHECK(err == cudaSuccess, "scale kernel launch failed: ", cudaGetErrorString(err));
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("scale", &scale, "y = alpha * x (CUDA)");
}
