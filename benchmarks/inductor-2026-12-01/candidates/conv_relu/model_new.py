"""torch.compile's kernels for conv_relu, as a Triton candidate (kernelpilot init --from-inductor).

The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher
did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.
"""

import torch
import triton
import triton.language as tl
from torch import nn

import triton_helpers


KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile's
KERNELPILOT_LIBRARIES = ('cudnn',)  # Inductor's library calls, kept: allowed for this candidate, listed in the verdict


# Topologically Sorted Source Nodes: [conv2d], Original ATen: [aten.convolution]
# Source node to ATen node mapping:
#   conv2d => convolution
#   return %buf0
@triton.jit
def triton_poi_fused_convolution_0(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 4096
    xnumel = 3136
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 128)
    y1 = yindex // 128
    tmp0 = tl.load(in_ptr0 + (x2 + 3136*y3), xmask, eviction_policy='evict_last').to(tl.float32)
    tl.store(out_ptr0 + (y0 + 128*x2 + 401408*y1), tmp0, xmask)


# Topologically Sorted Source Nodes: [conv2d], Original ATen: [aten.convolution]
# Source node to ATen node mapping:
#   conv2d => convolution
#   return %buf1
@triton.jit
def triton_poi_fused_convolution_1(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 16384
    xnumel = 9
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y3 = yindex
    y0 = (yindex % 128)
    y1 = yindex // 128
    tmp0 = tl.load(in_ptr0 + (x2 + 9*y3), xmask, eviction_policy='evict_last').to(tl.float32)
    tl.store(out_ptr0 + (y0 + 128*x2 + 1152*y1), tmp0, xmask)


# Topologically Sorted Source Nodes: [conv2d, relu], Original ATen: [aten.convolution, aten.relu]
# Source node to ATen node mapping:
#   conv2d => convolution
#   relu => relu
#   return %relu
@triton.jit
def triton_poi_fused_convolution_relu_2(in_ptr0, in_ptr1, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 4096
    xnumel = 3136
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = tl.full([YBLOCK], True, tl.int1)[:, None]
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x2 = xindex
    y0 = (yindex % 128)
    y1 = yindex // 128
    y3 = yindex
    tmp0 = tl.load(in_ptr0 + (y0 + 128*x2 + 401408*y1), xmask, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (y0), None, eviction_policy='evict_last').to(tl.float32)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1, 1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tl.store(out_ptr0 + (x2 + 3136*y3), tmp4, xmask)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs) -> None:
        super().__init__()
        # the problem Model's parameters and buffers (names, shapes, dtypes); the harness loads their values
        self.add_module('conv', nn.Module())
        self.get_submodule('conv').register_parameter('weight', nn.Parameter(torch.empty((128, 128, 3, 3), dtype=torch.bfloat16), requires_grad=False))
        self.get_submodule('conv').register_parameter('bias', nn.Parameter(torch.empty((128,), dtype=torch.bfloat16), requires_grad=False))

    def forward(self, x):
        arg0_1, arg1_1, arg2_1 = self.conv.weight, self.conv.bias, x
        device = x.device
        buf0 = torch.empty_strided((32, 128, 56, 56), (401408, 1, 7168, 128), dtype=torch.bfloat16, device=device)
        # Topologically Sorted Source Nodes: [conv2d], Original ATen: [aten.convolution]
        triton_poi_fused_convolution_0[(triton.cdiv(3136, 32), triton.cdiv(4096, 32),)](arg2_1, buf0, 4096, 3136, XBLOCK=32, YBLOCK=32, num_warps=4, num_stages=1)
        del arg2_1
        buf1 = torch.empty_strided((128, 128, 3, 3), (1152, 1, 384, 128), dtype=torch.bfloat16, device=device)
        # Topologically Sorted Source Nodes: [conv2d], Original ATen: [aten.convolution]
        triton_poi_fused_convolution_1[(triton.cdiv(9, 16), triton.cdiv(16384, 64),)](arg0_1, buf1, 16384, 9, XBLOCK=16, YBLOCK=64, num_warps=4, num_stages=1)
        del arg0_1
        # Topologically Sorted Source Nodes: [conv2d], Original ATen: [aten.convolution]
        buf2 = torch.convolution(buf0, buf1, stride=(1, 1), padding=(1, 1), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        del buf1
        buf3 = torch.as_strided(buf0, (32, 128, 56, 56), (401408, 3136, 56, 1), 0)
        del buf0
        # Topologically Sorted Source Nodes: [conv2d, relu], Original ATen: [aten.convolution, aten.relu]
        triton_poi_fused_convolution_relu_2[(triton.cdiv(3136, 16), triton.cdiv(4096, 256),)](buf2, arg1_1, buf3, 4096, 3136, XBLOCK=16, YBLOCK=256, num_warps=8, num_stages=1)
        del arg1_1
        del buf2
        return buf3
