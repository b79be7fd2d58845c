"""Where the compiled step's attention time goes (issue 52): how transformers' Llama calls SDPA at apply's shapes, and
what each of SDPA's backends takes for that call, forward and forward + backward.

    python benchmarks/attention_backends.py --out attention.json [--batch 16] [--seq 1024] [--layers 16]

One layer of a Llama-3.2-1B-shaped LlamaForCausalLM (transformers, sdpa attention, bf16) is run once with labels; each
``scaled_dot_product_attention`` call is recorded (shapes, mask, ``is_causal``, ``enable_gqa``). That call is then
timed with the cuDNN, flash and memory-efficient backends (CUDA events, median of ``--iters``) and scaled by
``--layers``, to set beside the step profile's attention row (cuDNN, 43.5 ms a step on the H100, 2026-12-07), once
with contiguous q, k, v and once laid out as the model passed them. A backend that refuses the call is listed
with its error. (2026-12-07, H100, contiguous only: cuDNN 19.3 ms a step, flash 27.9 ms.)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def record_calls(batch: int, seq: int) -> list[dict[str, Any]]:
    """The SDPA calls of one forward of one Llama-3.2-1B-shaped layer, as transformers makes them."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=1, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=64, vocab_size=1024, max_position_embeddings=max(seq, 2048))
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)
    calls: list[dict[str, Any]] = []
    original = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **kw):
        calls.append({"q": list(q.shape), "k": list(k.shape), "v": list(v.shape),
                      "mask": None if attn_mask is None else [list(attn_mask.shape), str(attn_mask.dtype)],
                      "is_causal": bool(is_causal), "enable_gqa": bool(enable_gqa), "scale": scale,
                      "q_stride": list(q.stride()), "k_stride": list(k.stride()), "v_stride": list(v.stride())})
        return original(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                        enable_gqa=enable_gqa, **kw)

    F.scaled_dot_product_attention = spy  # transformers looks the function up on the module at each call
    try:
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
    finally:
        F.scaled_dot_product_attention = original
    return calls


def _tensor(shape: list[int], stride: list[int] | None) -> torch.Tensor:
    """A random bf16 leaf of ``shape``, laid out with ``stride`` when given (the recorded call's layout)."""
    if stride is None:
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    t = torch.empty_strided(shape, stride, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        t.normal_()
    return t.requires_grad_()


def time_backend(call: dict[str, Any], backend: SDPBackend, iters: int, recorded: bool = False) -> dict[str, Any]:
    """The recorded call's forward and forward + backward with one backend, in ms (median of ``iters``); with
    ``recorded``, q and k laid out as the model passed them (q is a transposed view of the projection's output),
    else contiguous."""
    q = _tensor(call["q"], call["q_stride"] if recorded else None)
    k = _tensor(call["k"], call["k_stride"] if recorded else None)
    v = _tensor(call["v"], call.get("v_stride") if recorded else None)
    mask = None
    if call["mask"] is not None:
        mask = torch.zeros(call["mask"][0], device="cuda", dtype=torch.bfloat16)
    grad = torch.randn(call["q"][:-1] + [call["v"][-1]], device="cuda", dtype=torch.bfloat16)
    kwargs = {"attn_mask": mask, "is_causal": call["is_causal"], "enable_gqa": call["enable_gqa"]}
    layout = "as recorded" if recorded else "contiguous"

    def measure(fn) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    try:
        with sdpa_kernel([backend]):
            fwd = measure(lambda: F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), **kwargs))
            both = measure(lambda: F.scaled_dot_product_attention(q, k, v, **kwargs).backward(grad))
    except RuntimeError as exc:
        return {"backend": backend.name, "layout": layout, "error": str(exc).splitlines()[0][:200]}
    return {"backend": backend.name, "layout": layout, "forward_ms": fwd, "forward_backward_ms": both}


def flops(call: dict[str, Any]) -> float:
    """The call's forward FLOPs (two matmuls of S x S x D per head; half of them under a causal mask)."""
    b, h, s, d = call["q"]
    full = 4.0 * b * h * s * call["k"][2] * d
    return full / 2 if call["is_causal"] else full


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    calls = record_calls(args.batch, args.seq)
    forward_calls = calls[:1]
    rows = []
    for call in forward_calls:
        for backend, recorded in ((b, r) for r in (False, True) for b in (
                SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION)):
            row = time_backend(call, backend, args.iters, recorded)
            if "forward_ms" in row:
                row["step_ms"] = row["forward_backward_ms"] * args.layers
                row["forward_tflops"] = flops(call) / row["forward_ms"] / 1e9
                row["forward_backward_tflops"] = 3.5 * flops(call) / row["forward_backward_ms"] / 1e9
            rows.append(row)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": calls, "layers": args.layers,
              "timings": rows}
    args.out.write_text(json.dumps(result, indent=1))
    print(f"SDPA calls in one layer's forward: {len(calls)}; the first: {json.dumps(calls[0]) if calls else None}")
    print(f"{'backend':22} {'layout':12} {'fwd ms':>8} {'fwd+bwd ms':>11} {'x layers':>9} {'fwd TF/s':>9} "
          f"{'f+b TF/s':>9}")
    for r in rows:
        if "error" in r:
            print(f"{r['backend']:22} {r['layout']:12} refused: {r['error']}")
        else:
            print(f"{r['backend']:22} {r['layout']:12} {r['forward_ms']:8.3f} {r['forward_backward_ms']:11.3f} "
                  f"{r['step_ms']:9.2f} "
                  f"{r['forward_tflops']:9.0f} {r['forward_backward_tflops']:9.0f}")


if __name__ == "__main__":
    main()
