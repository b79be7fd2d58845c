"""A KernelBench single-file candidate for tests/data/adversarial/problems/scale_add_fp32.py, written the
way KernelBench generations are: ModelNew + load_inline, the CUDA source including torch/extension.h."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_add_kernel(const float* x, const float* y, float* out, float alpha, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = alpha * x[i] + y[i];
    }
}

torch::Tensor scale_add_cuda(torch::Tensor x, torch::Tensor y, double alpha) {
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    scale_add_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(),
                                          (float)alpha, n);
    return out;
}
"""

scale_add_cpp_source = "torch::Tensor scale_add_cuda(torch::Tensor x, torch::Tensor y, double alpha);"

scale_add = load_inline(
    name="scale_add",
    cpp_sources=scale_add_cpp_source,
    cuda_sources=scale_add_source,
    functions=["scale_add_cuda"],
    verbose=False,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha
        self.scale_add = scale_add

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.scale_add.scale_add_cuda(x.contiguous(), y.contiguous(), self.alpha)
