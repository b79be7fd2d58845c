"""The files apply_gpu.py writes: the Llama-style ``train.py`` and the two hand-written Triton candidates."""

from __future__ import annotations

TRAIN = '''"""A Llama-style model of 8 layers, random weights, trained for a few steps (kernelpilot apply evidence)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, HIDDEN, INTERMEDIATE, HEADS, VOCAB, SEQ, BATCH = 8, 2048, 5632, 16, 32000, 1024, 4
EPS = 1e-5
LOSS_IN_FORWARD = False  # True: the loss computed in the model's forward (transformers' labels=), else in this script


def hf_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=HEADS, rms_norm_eps=EPS,
                         max_position_embeddings=SEQ, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


class LlamaRMSNorm(nn.Module):
    def __init__(self, d, eps=EPS):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q, k, v = (p(x).view(b, s, HEADS, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, HIDDEN))


class LlamaDecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(HIDDEN)
        self.self_attn = LlamaAttention()
        self.post_attention_layernorm = LlamaRMSNorm(HIDDEN)
        self.mlp = LlamaMLP()

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class PlainLlama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(LlamaDecoderLayer() for _ in range(LAYERS))
        self.norm = LlamaRMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        d = HIDDEN // HEADS
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(SEQ).float(), inv)
        emb = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, input_ids, labels=None):
        x = self.embed_tokens(input_ids)
        s = input_ids.shape[1]
        cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        if labels is None:
            return logits
        # as transformers' causal-LM loss: labels shifted here (the last position ignored), the logits upcast
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), shifted.view(-1), ignore_index=-100)
        return {"loss": loss, "logits": logits}


def build():
    """The model, what it is, and the keyword arguments of its call in a training step."""
    try:
        return hf_model(), "transformers LlamaForCausalLM", {"use_cache": False}  # training needs no KV cache
    except ImportError:
        return PlainLlama(), "plain-torch Llama (transformers is not installed)", {}


def main():
    torch.manual_seed(0)
    with torch.device("cuda"):  # the weights drawn where they run: a 1.6B model's CPU init cost seconds every run
        model, kind, call_kwargs = build()
    model = model.to("cuda", torch.bfloat16)
    print(f"model: {kind}, {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, VOCAB, (64, BATCH, SEQ + 1), device="cuda")
    for step in range(10_000):
        tokens = data[step % 64]
        if LOSS_IN_FORWARD:  # the labels are the inputs: the forward shifts them
            loss = model(tokens[:, :-1], labels=tokens[:, :-1], **call_kwargs)["loss"]
        else:
            out = model(tokens[:, :-1], **call_kwargs)
            logits = out.logits if hasattr(out, "logits") else out
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''

RMSNORM = '''"""Fused RMSNorm, forward and backward (one program per row forward; a block of rows per program backward,
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
        self.@@W@@ = nn.Parameter(torch.ones(@@N@@, dtype=torch.bfloat16))

    def forward(self, x0):
        n = x0.shape[-1]
        x = x0.contiguous()
        out = torch.empty_like(x)
        rmsnorm_kernel[(x.numel() // n,)](x, self.@@W@@, out, n, @@EPS@@, BLOCK=triton.next_power_of_2(n), num_warps=8)
        return out

    def backward(self, grads, x0):
        n = x0.shape[-1]
        x, dy = x0.contiguous(), grads[0].contiguous()
        rows, per = x.numel() // n, 16
        blocks = triton.cdiv(rows, per)
        dx = torch.empty_like(x)
        dw = torch.empty((blocks, n), device=x.device, dtype=torch.float32)
        rmsnorm_backward_kernel[(blocks,)](x, self.@@W@@, dy, dx, dw, rows, n, @@EPS@@, ROWS=per,
                                           BLOCK=triton.next_power_of_2(n), num_warps=8)
        return (dx,), {"@@W@@": dw.sum(0).to(x.dtype)}
'''

SILU_MUL = '''"""Fused SiLU(gate) * up, forward and backward in one kernel each (the backward recomputes SiLU from the
gate rather than saving it); bf16 rounding as eager does."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(g_ptr, u_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + offs, (s * u).to(tl.bfloat16), mask=mask)


@triton.jit
def silu_mul_backward_kernel(g_ptr, u_ptr, dout_ptr, dg_ptr, du_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dout = tl.load(dout_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = 1.0 / (1.0 + tl.exp(-g))
    s = (g * sig).to(tl.bfloat16).to(tl.float32)
    tl.store(du_ptr + offs, (dout * s).to(tl.bfloat16), mask=mask)
    ds = (dout * u).to(tl.bfloat16).to(tl.float32)
    tl.store(dg_ptr + offs, (ds * sig * (1.0 + g * (1.0 - sig))).to(tl.bfloat16), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x0, x1):
        g, u = x0.contiguous(), x1.contiguous()
        out = torch.empty_like(g)
        n = g.numel()
        silu_mul_kernel[(triton.cdiv(n, 4096),)](g, u, out, n, BLOCK=4096, num_warps=8)
        return out

    def backward(self, grads, x0, x1):
        g, u, dout = x0.contiguous(), x1.contiguous(), grads[0].contiguous()
        dg, du = torch.empty_like(g), torch.empty_like(u)
        n = g.numel()
        silu_mul_backward_kernel[(triton.cdiv(n, 4096),)](g, u, dout, dg, du, n, BLOCK=4096, num_warps=8)
        return (dg, du), {}
'''

ADD_RMSNORM = '''"""Fused residual add and RMSNorm: s = x0 + x1 (bf16), y = w * bf16(s * rstd(s)); returns (y, s). Forward one
program per row; backward a block of rows per program (the weight's gradient summed per block, then over
blocks), the gradient of s from the norm and from s's later use (grads[1]) added in bf16 as autograd does."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_kernel(a_ptr, b_ptr, w_ptr, y_ptr, s_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    s = (a + b).to(tl.bfloat16)
    tl.store(s_ptr + row * n_cols + cols, s, mask=mask)
    x = s.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    n = (x * rstd).to(tl.bfloat16).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, (w * n).to(tl.bfloat16), mask=mask)


@triton.jit
def add_rmsnorm_backward_kernel(s_ptr, w_ptr, dy_ptr, ds_ptr, dx_ptr, dw_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr,
                                BLOCK: tl.constexpr):
    block = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(block * ROWS, tl.minimum(block * ROWS + ROWS, n_rows)):
        x = tl.load(s_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        ds = tl.load(ds_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        n = (x * rstd).to(tl.bfloat16).to(tl.float32)
        dw += (dy * n).to(tl.bfloat16).to(tl.float32)
        dn = (dy * w).to(tl.bfloat16).to(tl.float32)
        dx = dn * rstd - x * (rstd * rstd * rstd) * (tl.sum(dn * x, axis=0) / n_cols)
        dx = (dx.to(tl.bfloat16).to(tl.float32) + ds).to(tl.bfloat16)
        tl.store(dx_ptr + row * n_cols + cols, dx, mask=mask)
    tl.store(dw_ptr + block * n_cols + cols, dw, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.@@W@@ = nn.Parameter(torch.ones(@@N@@, dtype=torch.bfloat16))

    def forward(self, x0, x1):
        n = x0.shape[-1]
        a, b = x0.contiguous(), x1.contiguous()
        y, s = torch.empty_like(a), torch.empty_like(a)
        add_rmsnorm_kernel[(a.numel() // n,)](a, b, self.@@W@@, y, s, n, @@EPS@@, BLOCK=triton.next_power_of_2(n),
                                              num_warps=8)
        return y, s

    def backward(self, grads, x0, x1):
        n = x0.shape[-1]
        s = (x0 + x1).contiguous()  # recomputed (bf16, as the forward rounds it), not saved
        dy, ds = grads[0].contiguous(), grads[1].contiguous()
        rows, per = s.numel() // n, 16
        blocks = triton.cdiv(rows, per)
        dx = torch.empty_like(s)
        dw = torch.empty((blocks, n), device=s.device, dtype=torch.float32)
        add_rmsnorm_backward_kernel[(blocks,)](s, self.@@W@@, dy, ds, dx, dw, rows, n, @@EPS@@, ROWS=per,
                                               BLOCK=triton.next_power_of_2(n), num_warps=8)
        return (dx, dx), {"@@W@@": dw.sum(0).to(s.dtype)}
'''


# (layers, hidden, intermediate, heads, vocab, seq, batch): the H200 evidence size, and --small's (CPU smoke runs).
FULL = (8, 2048, 5632, 16, 32000, 1024, 4)
SMALL = (2, 64, 176, 4, 256, 32, 2)
# issue 52's evidence: Llama-3.2-1B's shapes (16 layers, hidden 2048, MLP 8192, 32 heads, vocabulary 128256), 16 x 1024
# tokens a step; its 8 key-value heads and tied embeddings are not modelled (every head has its keys and values, and
# the head has a weight of its own)
LLAMA32 = (16, 2048, 8192, 32, 128256, 1024, 16)


def train_source(small: bool = False, device: str = "cuda", batch: int | None = None, llama32: bool = False,
                 loss_in_forward: bool = False) -> str:
    """``train.py``: the default (full size, cuda, batch 4) is the script session 6's GPU evidence ran;
    ``batch`` changes only the number of sequences of 1024 tokens per step; ``llama32``: Llama-3.2-1B's shapes;
    ``loss_in_forward``: the loss computed in the model's forward (``labels=``), where a head+loss swap needs no
    deferred logits (no graph break under torch.compile), instead of in the script."""
    sizes = SMALL if small else LLAMA32 if llama32 else FULL
    if batch is not None:
        sizes = (*sizes[:-1], batch)
    text = TRAIN.replace(", ".join(map(str, FULL)), ", ".join(map(str, sizes)), 1)
    if small or llama32:
        text = text.replace("of 8 layers", f"of {sizes[0]} layers", 1)
    if loss_in_forward:
        text = text.replace("LOSS_IN_FORWARD = False", "LOSS_IN_FORWARD = True", 1)
    return text.replace('"cuda"', f'"{device}"')

HEAD_LOSS = '''"""Chunked fused linear + cross-entropy (the head and its loss): the loss of hidden states x0 (B, T, H) through
the head's weight (V, H) against labels x1 (N,), mean over the labels that are not -100, and the gradients of x0
and the weight, CHUNK rows of logits at a time. Per chunk the logits are one matmul in the model's dtype (bf16: the
model rounds its logits there too); one Triton program per row reads its row twice (the max and the sum online,
then the gradient) and overwrites it in place with its gradient for a loss gradient of 1: (softmax - one-hot) / the
count of kept labels, in fp32, rounded once to bf16 as autograd rounds it. The forward computes the gradients too
and keeps them until ModelNew.backward, which scales them by the loss's gradient: the full logits are never held,
the weight's gradient is accumulated over chunks in fp32 (by the GEMMs themselves) and rounded once, and the head's
matmul runs three times a step, as unfused."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 4096
IGNORE = -100


@triton.jit
def _row_loss_grad(logits, labels, loss, inv_count, stride, V, IGNORE_INDEX: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = logits + row.to(tl.int64) * stride
    label = tl.load(labels + row)
    m = -float("inf")
    s = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        new = tl.maximum(m, tl.max(x, 0))
        s = s * tl.exp(m - new) + tl.sum(tl.exp(x - new), 0)
        m = new
    lse = m + tl.log(s)
    keep = label != IGNORE_INDEX  # a constexpr argument: a compiled kernel reads no plain global
    picked = tl.load(base + tl.where(keep, label, 0)).to(tl.float32)  # before the row is overwritten
    tl.store(loss + row, tl.where(keep, lse - picked, 0.0))
    scale = tl.load(inv_count)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < V, other=0.0).to(tl.float32)
        g = (tl.exp(x - lse) - tl.where(cols == label, 1.0, 0.0)) * scale
        tl.store(base + cols, tl.where(keep, g, 0.0).to(logits.dtype.element_ty, fp_downcast_rounding="rtne"),
                 mask=cols < V)  # round to nearest even, as torch rounds the fp32 gradient


def _key(x):
    return (x.data_ptr(), x._version, tuple(x.shape))


def _mm_fp32(a, b, acc=None):
    """a @ b accumulated in fp32, added to ``acc`` (fp32, in place) when given: on CUDA one bf16 GEMM with an fp32
    output, the accumulator read and written by the GEMM itself (beta = 1), no product buffer between chunks."""
    if a.is_cuda:
        if acc is None:
            return torch.mm(a, b, out_dtype=torch.float32)
        return torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)
    product = a.float() @ b.float()
    return product if acc is None else acc.add_(product)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.p_lm_head_weight = nn.Parameter(torch.empty(0))
        self._kept = None  # (x0's key, gradient of x0, gradient of the weight in fp32) for a loss gradient of 1

    def forward(self, x0, x1):
        weight = self.p_lm_head_weight.detach()  # the gradients are computed here, not recorded by autograd
        h = x0.detach().reshape(-1, x0.shape[-1])
        count = (x1 != IGNORE).sum()
        inv_count = 1.0 / count.float()  # on the device: no synchronisation
        losses = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
        gh = torch.empty_like(h)
        gw = None  # the first chunk's product, then every later chunk added into it by its GEMM
        for start in range(0, h.shape[0], CHUNK):
            rows = slice(start, start + CHUNK)
            logits = h[rows] @ weight.t()
            n, vocab = logits.shape
            _row_loss_grad[(n,)](logits, x1[rows], losses[rows], inv_count, logits.stride(0), vocab, IGNORE,
                                 BLOCK=4096)
            torch.mm(logits, weight, out=gh[rows])  # the rows' gradient, rounded as autograd's backward rounds it
            gw = _mm_fp32(logits.t(), h[rows], gw)
        self._kept = (_key(x0), gh, gw)
        return losses.sum() / count  # float32: the script upcasts the logits before its cross-entropy

    def backward(self, grads, x0, x1):
        kept, gh, gw = self._kept
        if kept != _key(x0):
            raise RuntimeError("backward of another call than the last forward")
        self._kept = None
        g = grads[0]  # 1 for loss.backward(): both products below are then exact
        return ((gh * g.to(gh.dtype)).view_as(x0), None), {
            "p_lm_head_weight": gw.mul_(g.float()).to(self.p_lm_head_weight.dtype)}  # gw is not used again
'''
