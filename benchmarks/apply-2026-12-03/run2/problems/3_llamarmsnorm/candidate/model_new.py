"""Fused RMSNorm, forward and backward (one program per row forward; a block of rows per program backward,
the weight's gradient summed per block, then over blocks), rounding where the model rounds: x*rstd to bf16,
then * weight; backward as autograd rounds the reference's steps."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    y = (x * rstd).to(tl.bfloat16).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (w * y).to(tl.bfloat16), mask=mask)


@triton.jit
def rmsnorm_backward_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr,
                            BLOCK: tl.constexpr):
    block = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(block * ROWS, tl.minimum(block * ROWS + ROWS, n_rows)):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        n = (x * rstd).to(tl.bfloat16).to(tl.float32)
        dw += (dy * n).to(tl.bfloat16).to(tl.float32)
        dn = (dy * w).to(tl.bfloat16).to(tl.float32)
        dx = dn * rstd - x * (rstd * rstd * rstd) * (tl.sum(dn * x, axis=0) / n_cols)
        tl.store(dx_ptr + row * n_cols + cols, dx.to(tl.bfloat16), mask=mask)
    tl.store(dw_ptr + block * n_cols + cols, dw, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.p_weight = nn.Parameter(torch.ones(2048, dtype=torch.bfloat16))

    def forward(self, x0):
        n = x0.shape[-1]
        x = x0.contiguous()
        out = torch.empty_like(x)
        rmsnorm_kernel[(x.numel() // n,)](x, self.p_weight, out, n, 1e-5, BLOCK=triton.next_power_of_2(n), num_warps=8)
        return out

    def backward(self, grads, x0):
        n = x0.shape[-1]
        x, dy = x0.contiguous(), grads[0].contiguous()
        rows, per = x.numel() // n, 16
        blocks = triton.cdiv(rows, per)
        dx = torch.empty_like(x)
        dw = torch.empty((blocks, n), device=x.device, dtype=torch.float32)
        rmsnorm_backward_kernel[(blocks,)](x, self.p_weight, dy, dx, dw, rows, n, 1e-5, ROWS=per,
                                           BLOCK=triton.next_power_of_2(n), num_warps=8)
        return (dx,), {"p_weight": dw.sum(0).to(x.dtype)}
