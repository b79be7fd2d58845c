import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gelu_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void gelu_fn_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

torch::Tensor gelu_fn_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_fn_cuda: a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  long long n = xc.numel();
  int threads = 256;
  long long want = (n + threads - 1) / threads;
  int blocks = (int)(want < 131072 ? want : 131072);
  gelu_fn_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
gelu_cpp_source = "torch::Tensor gelu_fn_cuda(torch::Tensor x);"


class GeluFunction(torch.autograd.Function):
    """The extension is built on the Function's first use, inside its forward (honest)."""

    ext = None

    @staticmethod
    def forward(ctx, x):
        if GeluFunction.ext is None:
            GeluFunction.ext = load_inline(name="gelu_fn", cpp_sources=gelu_cpp_source, cuda_sources=gelu_cuda_source,
                                           functions=["gelu_fn_cuda"], verbose=False)
        return GeluFunction.ext.gelu_fn_cuda(x)

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("inference only")


class ModelNew(nn.Module):
    """load_inline inside an autograd Function (honest)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return GeluFunction.apply(x)
