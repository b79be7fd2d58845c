"""A CPU toy for the head+loss swap's step-1 loss difference in eager (issue 52, 2026-12-07): a bf16 head and its
cross-entropy under AdamW; does a head-weight gradient computed another way (fp32 over chunks, or from logits'
gradients some of which are one ulp away, as another kernel's softmax gives) move the loss at step 1 beyond what
the one-ulp sensitivity run moves it? Run: python adam_first_step_toy.py (about a minute on 2 cores)."""
import torch, torch.nn.functional as F
torch.manual_seed(0)
N, H, V, CH = 4096, 256, 8192, 1024
dt = torch.bfloat16
h0 = torch.randn(N, H, dtype=dt)
W0 = (torch.randn(V, H) * 0.02).to(dt)
y = torch.randint(0, V, (N,))

def grads(W, h, how):
    logits = h @ W.t()
    lf = logits.float()
    lse = torch.logsumexp(lf, 1)
    loss = (lse - lf.gather(1, y[:, None])[:, 0]).mean()
    g = (torch.softmax(lf, 1) - F.one_hot(y, V).float()) / N
    gl = g.to(dt)
    if how == "internal":  # another kernel's softmax: some of the logits' gradients one bf16 ulp away
        gen = torch.Generator().manual_seed(3)
        pick = (torch.rand(gl.shape, generator=gen) < 0.05).float() * torch.randint(-1, 2, gl.shape, generator=gen).float()
        gl = (gl.float() + pick * ulp(gl)).to(dt)
        how = "single"
    if how == "single":
        gw = gl.t() @ h                       # one bf16 GEMM, fp32 accumulate inside
    else:
        acc = torch.zeros(V, H)
        for s in range(0, N, CH):
            acc += gl[s:s+CH].t().float() @ h[s:s+CH].float()
        gw = acc.to(dt)
    return loss, gw

def ulp(x):
    w = x.float(); b = (w.view(torch.int32) & 0x7F800000).view(torch.float32)
    return b * torch.finfo(dt).eps

def moved(g, salt, floor=False):
    w = g.float(); gen = torch.Generator().manual_seed(salt)
    step = torch.randint(-1, 2, g.shape, generator=gen).float()
    u = ulp(g)
    if floor:
        u = torch.maximum(u, torch.finfo(torch.float32).eps * w.pow(2).mean().sqrt() * 1.0)
    return (w + step * u).to(dt)

def run(how, move=None, scale=1.0, steps=4):
    W = torch.nn.Parameter(W0.clone())
    opt = torch.optim.AdamW([W], lr=1e-3)
    out = []
    for _ in range(steps):
        loss, gw = grads(W.detach(), h0, how)
        if move: gw = move(gw)
        W.grad = gw * scale
        opt.step(); out.append(float(loss))
    return out

base = run("single")
_, a = grads(W0, h0, "single"); _, b = grads(W0, h0, "internal")
print("elements", a.numel(), "differ", int((a != b).sum()), "sign flips", int(((a > 0) & (b < 0) | (a < 0) & (b > 0)).sum()),
      "zero vs nonzero", int(((a == 0) ^ (b == 0)).sum()))
for name, r in [("internal", run("internal")), ("chunked", run("chunked")), ("one-ulp", run("single", lambda g: moved(g, 7))),
                ("ulp+floor", run("single", lambda g: moved(g, 7, True))), ("noise 2%", run("single", lambda g: (g.float() * (1 + 0.02 * torch.randn(g.shape, generator=torch.Generator().manual_seed(5)))).to(dt)))]:
    print(f"{name:16}", ["%.2e" % abs(x - y) for x, y in zip(r, base)])
