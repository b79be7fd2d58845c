"""torch.compile's kernels for gemm_bias_gelu, as a Triton candidate (kernelpilot init --from-inductor).

The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher
did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice


KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile's
KERNELPILOT_LIBRARIES = ('cublas',)  # Inductor's library calls, kept: allowed for this candidate, listed in the verdict


# Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
# Source node to ATen node mapping:
#   gelu => add, add_1, convert_element_type_3, convert_element_type_4, mul, mul_1, mul_2, mul_3, mul_4, mul_5, tanh
#   return %convert_element_type_4
@triton.jit
def triton_poi_fused_gelu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 134217728
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_out_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = tl.full([1], 0.5, tl.float32)
    tmp3 = tmp1 * tmp2
    tmp4 = tmp1 * tmp1
    tmp5 = tmp4 * tmp1
    tmp6 = tl.full([1], 0.044715, tl.float32)
    tmp7 = tmp5 * tmp6
    tmp8 = tmp1 + tmp7
    tmp9 = tl.full([1], 0.7978845608028654, tl.float32)
    tmp10 = tmp8 * tmp9
    tmp11 = libdevice.tanh(tmp10)
    tmp12 = tl.full([1], 1.0, tl.float32)
    tmp13 = tmp11 + tmp12
    tmp14 = tmp3 * tmp13
    tmp15 = tmp14.to(tl.float32)
    tl.store(in_out_ptr0 + (x0), tmp15, None)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs) -> None:
        super().__init__()
        # the problem Model's parameters and buffers (names, shapes, dtypes); the harness loads their values
        self.add_module('linear', nn.Module())
        self.get_submodule('linear').register_parameter('weight', nn.Parameter(torch.empty((16384, 4096), dtype=torch.bfloat16), requires_grad=False))
        self.get_submodule('linear').register_parameter('bias', nn.Parameter(torch.empty((16384,), dtype=torch.bfloat16), requires_grad=False))

    def forward(self, x):
        arg0_1, arg1_1, arg2_1 = self.linear.weight, self.linear.bias, x
        device = x.device
        buf0 = torch.empty_strided((8192, 16384), (16384, 1), dtype=torch.bfloat16, device=device)
        # Topologically Sorted Source Nodes: [linear], Original ATen: [aten.t, aten.addmm]
        torch.addmm(arg1_1, arg2_1, torch.as_strided(arg0_1, (4096, 16384), (1, 4096), 0), alpha=1, beta=1, out=buf0)
        del arg0_1
        del arg1_1
        del arg2_1
        buf1 = buf0
        del buf0
        # Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
        triton_poi_fused_gelu_0[(triton.cdiv(134217728, 1024),)](buf1, 134217728, XBLOCK=1024, num_warps=4, num_stages=1)
        return buf1
