"""torch.compile's kernels for rmsnorm, as a Triton candidate (kernelpilot init --from-inductor).

The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher
did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice


KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile's


# Topologically Sorted Source Nodes: [xf, pow_1, mean, add, rsqrt, y, float_2, mul_1, to], Original ATen: [aten._to_copy, aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul]
# Source node to ATen node mapping:
#   add => add
#   float_2 => convert_element_type_1
#   mean => mean
#   mul_1 => mul_1
#   pow_1 => pow_1
#   rsqrt => rsqrt
#   to => convert_element_type_2
#   xf => convert_element_type
#   y => mul
#   return %buf0,%convert_element_type_2
@triton.jit
def triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0(in_ptr0, in_ptr1, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 131072
    r0_numel = 4096
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex
    _tmp4 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + 4096*x0), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp1 = tmp0.to(tl.float32)
        tmp2 = tmp1 * tmp1
        tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
        tmp5 = _tmp4 + tmp3
        _tmp4 = tl.where(r0_mask, tmp5, _tmp4)
    tmp4 = tl.sum(_tmp4, 1)[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp6 = tl.load(in_ptr0 + (r0_1 + 4096*x0), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp14 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp7 = tmp6.to(tl.float32)
        tmp8 = tl.full([1, 1], 4096.0, tl.float32)
        tmp9 = (tmp4 / tmp8)
        tmp10 = tl.full([1, 1], 1e-06, tl.float32)
        tmp11 = tmp9 + tmp10
        tmp12 = libdevice.rsqrt(tmp11)
        tmp13 = tmp7 * tmp12
        tmp15 = tmp14.to(tl.float32)
        tmp16 = tmp13 * tmp15
        tmp17 = tmp16.to(tl.float32)
        tl.store(out_ptr1 + (r0_1 + 4096*x0), tmp17, r0_mask)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs) -> None:
        super().__init__()
        # the problem Model's parameters and buffers (names, shapes, dtypes); the harness loads their values
        self.register_parameter('weight', nn.Parameter(torch.empty((4096,), dtype=torch.bfloat16), requires_grad=False))

    def forward(self, x):
        arg0_1, arg1_1 = x, self.weight
        device = x.device
        buf1 = torch.empty_strided((131072, 4096), (4096, 1), dtype=torch.bfloat16, device=device)
        # Topologically Sorted Source Nodes: [xf, pow_1, mean, add, rsqrt, y, float_2, mul_1, to], Original ATen: [aten._to_copy, aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul]
        triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0[(triton.cdiv(131072, 1),)](arg0_1, arg1_1, buf1, 131072, 4096, XBLOCK=1, R0_BLOCK=4096, num_warps=16, num_stages=1)
        del arg0_1
        del arg1_1
        return buf1
