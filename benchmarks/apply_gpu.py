"""Issue 28's GPU evidence: from a real model to a faster model, end to end, on one H200.

    python benchmarks/apply_gpu.py --out "$OUT/apply-$(date +%F)"      # all phases, or one device call each:
    # one phase per device call (each under 10 minutes), the work kept in /tmp while the machine is warm:
    python benchmarks/apply_gpu.py --out /tmp/apply --phase prepare && cp -r /tmp/apply "$OUT/"   # then eager, compile, write

1. writes a git repository with ``train.py``: a Llama-style causal LM of 8 layers built from its config
   with random weights (``transformers``' LlamaForCausalLM when installed, else the same architecture in
   plain torch, below), bf16, AdamW, a short training loop;
2. ``kernelpilot hotspots --group module`` and ``--group fusion`` on it (tables saved);
3. extracts the RMSNorm module (``--group module --extract``) and the SiLU * mul chain of the MLP
   (``--group fusion --extract``);
4. writes a hand-written Triton candidate for each (fused RMSNorm; fused SiLU * mul that also returns
   the SiLU output backward keeps), evaluates each with ``kernelpilot eval --json`` and approves it
   through a real session workspace (which writes the drop-in operator and checks its gradients
   against float64);
5. ``kernelpilot apply train.py`` eager and ``--compile`` (and, if the triton_op form fails under
   torch.compile, once more with ``KERNELPILOT_DROPIN_OPAQUE=1``), then ``--write --yes``;

everything under ``--out`` (logs, tables, problems, verdicts, the repository, ``summary.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TRAIN = '''"""A Llama-style model of 8 layers, random weights, trained for a few steps (kernelpilot apply evidence)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, HIDDEN, INTERMEDIATE, HEADS, VOCAB, SEQ, BATCH = 8, 2048, 5632, 16, 32000, 1024, 4
EPS = 1e-5


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

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        s = input_ids.shape[1]
        cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def build():
    try:
        return hf_model(), "transformers LlamaForCausalLM"
    except ImportError:
        return PlainLlama(), "plain-torch Llama (transformers is not installed)"


def main():
    torch.manual_seed(0)
    model, kind = build()
    model = model.to("cuda", torch.bfloat16)
    print(f"model: {kind}, {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, VOCAB, (64, BATCH, SEQ + 1), device="cuda")
    for step in range(10_000):
        tokens = data[step % 64]
        out = model(tokens[:, :-1])
        logits = out.logits if hasattr(out, "logits") else out
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''

RMSNORM = '''"""Fused RMSNorm (one program per row, the row in registers), rounding as the model does: x*rstd to bf16, then * weight."""

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
'''

SILU_MUL = '''"""Fused SiLU(gate) * up, also returning SiLU(gate) (autograd keeps it); bf16 rounding as eager does."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(g_ptr, u_ptr, out_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16)
    tl.store(s_ptr + offs, s, mask=mask)
    tl.store(out_ptr + offs, (s.to(tl.float32) * u).to(tl.bfloat16), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x0, x1):
        g, u = x0.contiguous(), x1.contiguous()
        out, s = torch.empty_like(g), torch.empty_like(g)
        n = g.numel()
        silu_mul_kernel[(triton.cdiv(n, 4096),)](g, u, out, s, n, BLOCK=4096, num_warps=8)
        return out, s
'''


def sh(cmd: list[str], cwd: Path, log: Path, timeout: float = 1800, env: dict[str, str] | None = None) -> tuple[int, str]:
    start = time.time()
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
        text, rc = res.stdout + ("\n[stderr]\n" + res.stderr if res.stderr.strip() else ""), res.returncode
    except subprocess.TimeoutExpired as exc:
        text, rc = f"timed out after {timeout} s\n{exc.stdout or ''}", 124
    log.write_text(f"$ {' '.join(cmd)}\n# rc={rc}, {time.time() - start:.1f} s\n{text}")
    print(f"[{rc}] {' '.join(cmd[2:5])} ... -> {log.name} ({time.time() - start:.0f} s)", flush=True)
    return rc, text


def row_number(table: str, needle: str) -> int | None:
    for line in table.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit() and needle in line:
            return int(parts[0])
    return None


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def approve(repo: Path, problem: Path, source: str, logs: Path) -> dict[str, object]:
    """Evaluate (kernelpilot eval) and approve the candidate through a session workspace."""
    rel = problem.relative_to(repo).as_posix()
    cand = repo / rel / "candidate"
    cand.mkdir(exist_ok=True)
    (cand / "model_new.py").write_text(source)
    rc, text = sh([sys.executable, "-m", "kernelpilot", "eval", str(problem / "problem.py"), str(cand), "--json"], repo,
                  logs / f"eval_{problem.name}.json.log")
    (cand / "model_new.py").unlink()
    from kernelpilot.workspace import Workspace

    ws = Workspace.open(repo, f"apply-{problem.name}", candidate_dir=f"{rel}/candidate", problem=f"{rel}/problem.py")
    ws.write_file(f"{rel}/candidate/model_new.py", source)
    ws.checkpoint("c1", "hand-written Triton kernel")
    commit = ws.approve("c1")
    return {"eval_rc": rc, "commit": commit, "notes": ws.notes[-1:], "files": git(repo, "show", "--name-only", "--format=", commit)}


PHASES = ("prepare", "eager", "compile", "write")


def prepare(repo: Path, logs: Path, summary: dict[str, object]) -> None:
    (repo / "train.py").write_text(TRAIN)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "kernelpilot evidence")
    git(repo, "config", "user.email", "evidence@localhost")
    git(repo, "add", "train.py")
    git(repo, "commit", "-q", "-m", "training script")
    kp = [sys.executable, "-m", "kernelpilot"]
    _, modules = sh(kp + ["hotspots", "--group", "module", "--steps", "4", "--depth", "4", "--top", "30", "train.py"], repo,
                    logs / "hotspots_module.txt")
    _, fusion = sh(kp + ["hotspots", "--group", "fusion", "--steps", "4", "--top", "10", "train.py"], repo,
                   logs / "hotspots_fusion.txt")
    norm_row = "RMSNorm)" if row_number(modules, "RMSNorm)") else None  # rows by name: rankings move between runs
    chain_row = ": silu -> mul" if row_number(fusion, ": silu -> mul") else None
    summary.update(norm_row=norm_row, chain_row=chain_row)
    problems = repo / "problems"
    if norm_row:
        sh(kp + ["hotspots", "--group", "module", "--steps", "4", "--depth", "4", "--top", "30", "--extract", norm_row,
                 "--weights", "--out", "problems", "train.py"], repo, logs / "extract_module.txt")
    if chain_row:
        sh(kp + ["hotspots", "--group", "fusion", "--steps", "4", "--top", "10", "--extract", chain_row, "--out",
                 "problems", "train.py"], repo, logs / "extract_chain.txt")
    extracted = sorted(p for p in problems.iterdir() if p.is_dir()) if problems.is_dir() else []
    summary["extracted"] = [p.name for p in extracted]
    if extracted:
        git(repo, "add", "problems")
        git(repo, "commit", "-q", "-m", "extracted problems")
    approvals = {}
    for problem in extracted:
        origin = json.loads((problem / "origin.json").read_text())
        if origin["kind"] == "module":
            (attr,) = origin["params"]
            n = origin["shapes"][0][0][-1]
            source = RMSNORM.replace("@@W@@", attr).replace("@@N@@", str(n)).replace("@@EPS@@", "1e-5")
        else:
            source = SILU_MUL
        try:
            approvals[problem.name] = approve(repo, problem, source, logs)
        except Exception as exc:  # recorded, the rest goes on
            approvals[problem.name] = {"error": f"{type(exc).__name__}: {exc}"}
    summary["approvals"] = approvals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "apply-evidence"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--phase", action="append", choices=PHASES,
                        help="run only these phases (repeatable; default all, in order): prepare (hotspots, extract, "
                             "candidates, approve), eager, compile, write; each stays under a 10-minute device call")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    logs, repo = out / "logs", out / "repo"
    logs.mkdir(parents=True, exist_ok=True)
    repo.mkdir(exist_ok=True)
    os.environ.setdefault("KERNELPILOT_DATA_DIR", str(out / "kp-data"))
    summary_file = out / "summary.json"
    summary: dict[str, object] = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    import torch

    summary["torch"], summary["gpu"] = torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else None
    kp = [sys.executable, "-m", "kernelpilot"]
    runs = dict(summary.get("apply_rc") or {})  # type: ignore[call-overload]
    for phase in args.phase or PHASES:
        summary[f"{phase}_started"] = time.strftime("%F %T")
        if phase == "prepare":
            prepare(repo, logs, summary)
        elif phase == "eager":
            runs["eager"], _ = sh(kp + ["apply", "--steps", str(args.steps), "train.py"], repo, logs / "apply_eager.txt")
        elif phase == "compile":
            runs["compile"], _ = sh(kp + ["apply", "--steps", str(args.steps), "--compile", "train.py"], repo,
                                    logs / "apply_compile.txt")
            if runs["compile"] != 0:
                runs["compile_opaque"], _ = sh(kp + ["apply", "--steps", str(args.steps), "--compile", "train.py"], repo,
                                               logs / "apply_compile_opaque.txt", env={"KERNELPILOT_DROPIN_OPAQUE": "1"})
        elif phase == "write":
            runs["write"], _ = sh(kp + ["apply", "--steps", "3", "--write", "--yes", "train.py"], repo, logs / "apply_write.txt")
            summary["git_log"] = git(repo, "log", "--stat", "--format=%h %s")
        summary["apply_rc"] = runs
        summary[f"{phase}_finished"] = time.strftime("%F %T")
        summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "git_log"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
