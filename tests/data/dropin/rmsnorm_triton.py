"""A Triton RMSNorm for tiny_llama's RMSNorm problem (fp32, eps 1e-6): one program per row; its backward is the
reference's (no ModelNew.backward). Run on the CPU under Triton's interpreter (TRITON_INTERPRET=1)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(out_ptr + row * n_cols + cols, x * rstd * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.p_weight = nn.Parameter(torch.ones(32))

    def forward(self, x0):
        x = x0.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rmsnorm_kernel[(x.numel() // n,)](x, self.p_weight, out, n, 1e-6, BLOCK=triton.next_power_of_2(n))
        return out
