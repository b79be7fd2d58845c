"""torch.compile's kernels for fused_chain, as a Triton candidate (kernelpilot init --from-inductor).

The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher
did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice


KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile's


# Topologically Sorted Source Nodes: [silu, mul, add, mul_1], Original ATen: [aten.silu, aten.mul, aten.add]
# Source node to ATen node mapping:
#   add => add_1
#   mul => mul
#   mul_1 => mul_1
#   silu => add, convert_element_type, convert_element_type_1, div, exp, neg
#   return %mul_1
@triton.jit
def triton_poi_fused_add_mul_silu_0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 536870912
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x2 = xindex
    x0 = (xindex % 8192)
    tmp0 = tl.load(in_ptr0 + (x2), None).to(tl.float32)
    tmp8 = tl.load(in_ptr1 + (x2), None).to(tl.float32)
    tmp10 = tl.load(in_ptr2 + (x0), None, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = -tmp1
    tmp3 = libdevice.exp(tmp2)
    tmp4 = tl.full([1], 1.0, tl.float32)
    tmp5 = tmp3 + tmp4
    tmp6 = (tmp1 / tmp5)
    tmp7 = tmp6.to(tl.float32)
    tmp9 = tmp7 * tmp8
    tmp11 = tmp9 + tmp10
    tmp12 = tl.full([1], 0.5, tl.float32)
    tmp13 = tmp11 * tmp12
    tl.store(out_ptr0 + (x2), tmp13, None)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs) -> None:
        super().__init__()
        # the problem Model's parameters and buffers (names, shapes, dtypes); the harness loads their values
        self.register_parameter('bias', nn.Parameter(torch.empty((8192,), dtype=torch.bfloat16), requires_grad=False))

    def forward(self, x, gate):
        arg0_1, arg1_1, arg2_1 = x, gate, self.bias
        device = x.device
        buf0 = torch.empty_strided((65536, 8192), (8192, 1), dtype=torch.bfloat16, device=device)
        # Topologically Sorted Source Nodes: [silu, mul, add, mul_1], Original ATen: [aten.silu, aten.mul, aten.add]
        triton_poi_fused_add_mul_silu_0[(triton.cdiv(536870912, 1024),)](arg0_1, arg1_1, arg2_1, buf0, 536870912, XBLOCK=1024, num_warps=4, num_stages=1)
        del arg0_1
        del arg1_1
        del arg2_1
        return buf0
