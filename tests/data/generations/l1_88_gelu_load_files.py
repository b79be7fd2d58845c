import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

GELU_CU = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

torch::Tensor gelu_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_cuda: a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  long long n = xc.numel();
  int threads = 256;
  long long want = (n + threads - 1) / threads;
  int blocks = (int)(want < 131072 ? want : 131072);
  gelu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gelu_cuda", &gelu_cuda, "GELU (tanh approximation)"); }
"""


def _build():
    # the sources written to a new temporary folder, built in another (as some published solutions do)
    folder = tempfile.mkdtemp(prefix="gelu_src_")
    path = os.path.join(folder, "gelu_kernel.cu")
    with open(path, "w") as f:
        f.write(GELU_CU)
    return load(name="gelu_files", sources=[path], build_directory=tempfile.mkdtemp(prefix="gelu_build_"),
                extra_cuda_cflags=["-O3"], verbose=False)


gelu = _build()


class ModelNew(nn.Module):
    """cpp_extension.load of a .cu file written to a temporary folder at import (honest)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return gelu.gelu_cuda(x)
