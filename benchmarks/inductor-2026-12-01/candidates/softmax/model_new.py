"""torch.compile's kernels for softmax, as a Triton candidate (kernelpilot init --from-inductor).

The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher
did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language.extra import libdevice

import triton_helpers


KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile's


# Topologically Sorted Source Nodes: [softmax], Original ATen: [aten._softmax, prims.prepare_softmax_online, aten.sub, aten.exp]
# Source node to ATen node mapping:
#   softmax => convert_element_type, convert_element_type_1, div
#   return %getitem,%getitem_1,%convert_element_type_1
@triton.jit
def triton_red_fused__softmax_exp_prepare_softmax_online_sub_0(in_ptr0, out_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 32768
    r0_numel = 16384
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex
    _tmp3_max = tl.full([XBLOCK, R0_BLOCK], float('-inf'), tl.float32)
    _tmp3_sum = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + 16384*x0), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp1 = tmp0.to(tl.float32)
        tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])

        _tmp3_max_next, _tmp3_sum_next = triton_helpers.online_softmax_combine(
            _tmp3_max, _tmp3_sum, tmp2, False
        )

        _tmp3_max = tl.where(r0_mask, _tmp3_max_next, _tmp3_max)
        _tmp3_sum = tl.where(r0_mask, _tmp3_sum_next, _tmp3_sum)

    tmp3, tmp4 = triton_helpers.online_softmax_reduce(
        _tmp3_max, _tmp3_sum, 1, False)
    tmp3 = tmp3[:, None]
    tmp4 = tmp4[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp5 = tl.load(in_ptr0 + (r0_1 + 16384*x0), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp6 = tmp5.to(tl.float32)
        tmp7 = tmp6 - tmp3
        tmp8 = libdevice.exp(tmp7)
        tmp9 = (tmp8 / tmp4)
        tmp10 = tmp9.to(tl.float32)
        tl.store(out_ptr2 + (r0_1 + 16384*x0), tmp10, r0_mask)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs) -> None:
        super().__init__()

    def forward(self, x):
        arg0_1 = x
        device = x.device
        buf2 = torch.empty_strided((32768, 16384), (16384, 1), dtype=torch.bfloat16, device=device)
        # Topologically Sorted Source Nodes: [softmax], Original ATen: [aten._softmax, prims.prepare_softmax_online, aten.sub, aten.exp]
        triton_red_fused__softmax_exp_prepare_softmax_online_sub_0[(triton.cdiv(32768, 1),)](arg0_1, buf2, 32768, 16384, XBLOCK=1, R0_BLOCK=2048, num_warps=16, num_stages=1)
        del arg0_1
        return buf2
