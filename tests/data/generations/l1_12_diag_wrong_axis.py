import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

diag_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void diag_scale_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                  long long rows, long long cols) {
  long long n = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    c[i] = a[i % cols] * b[i];  // scales columns: B @ diag(A)
  }
}

torch::Tensor diag_scale_cuda(torch::Tensor a, torch::Tensor b) {
  auto ac = a.contiguous();
  auto bc = b.contiguous();
  auto c = torch::empty_like(bc);
  long long rows = bc.size(0), cols = bc.size(1);
  int threads = 256;
  long long want = (rows * cols + threads - 1) / threads;
  int blocks = (int)(want < 65536 ? want : 65536);
  diag_scale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), rows, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}
"""
diag_cpp_source = "torch::Tensor diag_scale_cuda(torch::Tensor a, torch::Tensor b);"
diag = load_inline(name="diag_scale_cols", cpp_sources=diag_cpp_source, cuda_sources=diag_cuda_source,
                   functions=["diag_scale_cuda"], verbose=False)


class ModelNew(nn.Module):
    """scales B's columns instead of its rows (a wrong kernel: incorrect under both scores)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return diag.diag_scale_cuda(A, B)
