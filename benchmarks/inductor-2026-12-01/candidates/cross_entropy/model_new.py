"""torch.compile's kernels for cross_entropy, as a Triton candidate (kernelpilot init --from-inductor).

The @triton.jit kernels are Inductor's, unchanged; ModelNew.forward launches them as Inductor's launcher
did (same arguments, grid, block sizes, num_warps, num_stages). Edit it like any candidate.
"""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.language import math as tl_math

import triton_helpers


KERNELPILOT_ORIGIN = "inductor"  # the verdict flags a time not within 5% of torch.compile's


# Topologically Sorted Source Nodes: [float_1], Original ATen: [aten._to_copy, prims.prepare_softmax_online]
# Source node to ATen node mapping:
#   float_1 => convert_element_type
#   return %getitem,%getitem_1
@triton.jit
def triton_red_fused__to_copy_prepare_softmax_online_0(in_ptr0, out_ptr0, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 4096
    r0_numel = 128256
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
        tmp0 = tl.load(in_ptr0 + (r0_1 + 128256*x0), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
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
    tl.store(out_ptr0 + (x0), tmp3, None)
    tl.store(out_ptr1 + (x0), tmp4, None)


# Topologically Sorted Source Nodes: [cross_entropy, float_1], Original ATen: [aten.nll_loss_forward, aten._to_copy, aten.sub, aten._log_softmax]
# Source node to ATen node mapping:
#   cross_entropy => convert_element_type_1, div, full_default, full_default_1, gather, log, ne, ne_1, ne_2, neg, squeeze, sub_1, sum_2, sum_3, unsqueeze, where, where_1
#   float_1 => convert_element_type
#   return %sum_3,%sum_2,%div
@triton.jit
def triton_red_fused__log_softmax__to_copy_nll_loss_forward_sub_1(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, in_ptr3, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 1
    r0_numel = 4096
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    _tmp21 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    _tmp25 = tl.full([XBLOCK, R0_BLOCK], 0, tl.int64)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_0 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_0), r0_mask, eviction_policy='evict_first', other=0.0)
        tmp12 = tl.load(in_ptr2 + (r0_0), r0_mask, eviction_policy='evict_first', other=0.0)
        tmp14 = tl.load(in_ptr3 + (r0_0), r0_mask, eviction_policy='evict_first', other=0.0)
        tmp1 = tl.full([1, 1], -100, tl.int64)
        tmp2 = tmp0 != tmp1
        tmp3 = tl.full([1, 1], 0, tl.int64)
        tmp4 = tl.where(tmp2, tmp0, tmp3)
        tmp5 = tl.full([1, 1], 128256, tl.int32)
        tmp6 = tmp4 + tmp5
        tmp7 = tmp4 < 0
        tmp8 = tl.where(tmp7, tmp6, tmp4)
        tl.device_assert(((0 <= tmp8) & (tmp8 < 128256)) | ~(r0_mask), "index out of bounds: 0 <= tmp8 < 128256")
        tmp10 = tl.load(in_ptr1 + (tmp8 + 128256*r0_0), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp11 = tmp10.to(tl.float32)
        tmp13 = tmp11 - tmp12
        tmp15 = tl_math.log(tmp14)
        tmp16 = tmp13 - tmp15
        tmp17 = -tmp16
        tmp18 = tl.full([1, 1], 0.0, tl.float32)
        tmp19 = tl.where(tmp2, tmp17, tmp18)
        tmp20 = tl.broadcast_to(tmp19, [XBLOCK, R0_BLOCK])
        tmp22 = _tmp21 + tmp20
        _tmp21 = tl.where(r0_mask, tmp22, _tmp21)
        tmp23 = tmp2.to(tl.int64)
        tmp24 = tl.broadcast_to(tmp23, [XBLOCK, R0_BLOCK])
        tmp26 = _tmp25 + tmp24
        _tmp25 = tl.where(r0_mask, tmp26, _tmp25)
    tmp21 = tl.sum(_tmp21, 1)[:, None]
    tmp25 = tl.sum(_tmp25, 1)[:, None]
    tmp27 = tmp25.to(tl.float32)
    tmp28 = (tmp21 / tmp27)
    tl.debug_barrier()
    tl.store(in_out_ptr0 + (tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)), tmp28, None)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs) -> None:
        super().__init__()

    def forward(self, logits, targets):
        arg0_1, arg1_1 = logits, targets
        device = logits.device
        buf0 = torch.empty_strided((4096, 1), (1, 4096), dtype=torch.float32, device=device)
        buf1 = torch.empty_strided((4096, 1), (1, 4096), dtype=torch.float32, device=device)
        # Topologically Sorted Source Nodes: [float_1], Original ATen: [aten._to_copy, prims.prepare_softmax_online]
        triton_red_fused__to_copy_prepare_softmax_online_0[(triton.cdiv(4096, 1),)](arg0_1, buf0, buf1, 4096, 128256, XBLOCK=1, R0_BLOCK=2048, num_warps=16, num_stages=1)
        buf2 = torch.empty_strided((), (), dtype=torch.float32, device=device)
        buf4 = buf2
        del buf2
        # Topologically Sorted Source Nodes: [cross_entropy, float_1], Original ATen: [aten.nll_loss_forward, aten._to_copy, aten.sub, aten._log_softmax]
        triton_red_fused__log_softmax__to_copy_nll_loss_forward_sub_1[(triton.cdiv(1, 1),)](buf4, arg1_1, arg0_1, buf0, buf1, 1, 4096, XBLOCK=1, R0_BLOCK=2048, num_warps=16, num_stages=1)
        del arg0_1
        del arg1_1
        del buf0
        del buf1
        return buf4
