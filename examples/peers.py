"""The libraries our users call instead of writing a kernel, as peers in the example sweep (issue 18).

Liger (``liger-kernel``, Triton) and QuACK (``quack-kernels``, CuTe DSL) for the four memory-bound
examples, forward only. ``cute`` is our own RMSNorm in the CuTe DSL (examples/rmsnorm_cute), timed the same way
in its own column; it is not a peer in the "vs peer" ratio. Each peer is the library's public function, bound once to the problem Model's
parameters (converted outside the timed call where the library wants another dtype: QuACK's LayerNorm
takes float32 weight and bias, which is the math the Model does), and called with the problem's
inputs. Its output is then judged like ours: against the float64 Model, with the sweep's tolerances.

A peer that cannot run here (not installed, no such op, refused the dtype) comes back with
``fn=None`` and the reason, for the table: never silently dropped.

    peer("quack", "rmsnorm", model) -> Peer(name="quack", fn=<callable>, note="")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PEERS = ("liger", "quack", "cute")
PACKAGES = {"liger": "liger_kernel", "quack": "quack", "cute": "cutlass"}
OURS = ("cute",)  # our own kernels in another language, timed beside the peers (not peers in "vs peer")


@dataclass
class Peer:
    name: str
    fn: Callable[..., Any] | None
    note: str = ""  # why fn is None, or how the output was adapted


def version(name: str) -> str:
    """The installed version of a peer's package, or "" when it is not installed."""
    from importlib import metadata

    dist = {"liger": "liger-kernel", "quack": "quack-kernels", "cute": "nvidia-cutlass-dsl"}[name]
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def peer(name: str, op: str, model: Any) -> Peer:
    """The library ``name``'s forward for example ``op``, bound to ``model``'s parameters."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}: one of {', '.join(PEERS)}")
    try:
        importlib.import_module(PACKAGES[name])
        make = {"liger": _LIGER, "quack": _QUACK, "cute": _CUTE}[name]
        if op not in make:
            return Peer(name, None, f"{name} has no {op} forward")
        return make[op](model)
    except Exception as exc:  # noqa: BLE001 - any import or binding failure is reported in the table
        return Peer(name, None, f"unavailable: {type(exc).__name__}: {str(exc)[:160]}")


# ---- Liger: liger_kernel.transformers.functional ------------------------------------------------
def _liger_softmax(model: Any) -> Peer:
    from liger_kernel.transformers.functional import liger_softmax

    return Peer("liger", lambda x: liger_softmax(x))


def _liger_rmsnorm(model: Any) -> Peer:
    from liger_kernel.transformers.functional import liger_rms_norm

    w, eps = model.weight.detach(), float(model.eps)
    # "gemma" casting: everything in float32, cast at the end, as the Model computes it
    return Peer("liger", lambda x: liger_rms_norm(x, w, eps, offset=0.0, casting_mode="gemma", in_place=False))


def _liger_layernorm(model: Any) -> Peer:
    from liger_kernel.transformers.functional import liger_layer_norm

    w, b, eps = model.weight.detach(), model.bias.detach(), float(model.eps)
    return Peer("liger", lambda x: liger_layer_norm(x, w, b, eps))


def _liger_cross_entropy(model: Any) -> Peer:
    from liger_kernel.transformers.functional import liger_cross_entropy

    # its loss comes back in the logits' dtype; the Model's is float32
    return Peer("liger", lambda logits, targets: liger_cross_entropy(logits, targets).float(),
                "loss returned in the logits' dtype, compared as float32")


# ---- QuACK: quack.softmax, quack.rmsnorm, quack.cross_entropy ------------------------------------
def _quack_softmax(model: Any) -> Peer:
    from quack.softmax import softmax_fwd

    return Peer("quack", lambda x: softmax_fwd(x))


def _quack_rmsnorm(model: Any) -> Peer:
    from quack.rmsnorm import rmsnorm_fwd

    w, eps = model.weight.detach().float(), float(model.eps)  # the Model multiplies by weight.float()
    return Peer("quack", lambda x: rmsnorm_fwd(x.reshape(-1, x.shape[-1]), w, eps=eps)[0].view_as(x))


def _quack_layernorm(model: Any) -> Peer:
    from quack.rmsnorm import layernorm_fwd

    w, b, eps = model.weight.detach().float(), model.bias.detach().float(), float(model.eps)
    return Peer("quack", lambda x: layernorm_fwd(x.reshape(-1, x.shape[-1]), w, b, eps=eps).view_as(x),
                "weight and bias as float32 (QuACK's LayerNorm takes no other)")


def _quack_cross_entropy(model: Any) -> Peer:
    from quack.cross_entropy import cross_entropy

    return Peer("quack", lambda logits, targets: cross_entropy(logits, targets, reduction="mean"))


# ---- ours in the CuTe DSL: examples/rmsnorm_cute ------------------------------------------------------
def _cute_rmsnorm(model: Any) -> Peer:
    import sys
    from pathlib import Path

    import torch
    from sweep_cases import load_module

    folder = Path(__file__).resolve().parent / "rmsnorm_cute" / "candidate"
    if str(folder) not in sys.path:  # its model imports row_config from beside it
        sys.path.insert(0, str(folder))
    module = load_module(folder / "model_new.py", "rmsnorm_cute_model_new")
    weight = model.weight.detach()
    with torch.device(weight.device):
        new = module.ModelNew(weight.numel(), float(model.eps)).to(weight.dtype)
    new.load_state_dict(model.state_dict())
    return Peer("cute", lambda x: new(x), "examples/rmsnorm_cute (ours, CuTe DSL)")


_CUTE: dict[str, Callable[[Any], Peer]] = {"rmsnorm": _cute_rmsnorm}

_LIGER: dict[str, Callable[[Any], Peer]] = {
    "softmax": _liger_softmax, "rmsnorm": _liger_rmsnorm, "layernorm": _liger_layernorm,
    "cross_entropy": _liger_cross_entropy,
}
_QUACK: dict[str, Callable[[Any], Peer]] = {
    "softmax": _quack_softmax, "rmsnorm": _quack_rmsnorm, "layernorm": _quack_layernorm,
    "cross_entropy": _quack_cross_entropy,
}
