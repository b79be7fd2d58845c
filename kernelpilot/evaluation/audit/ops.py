"""The operator audit: the ATen operators ``ModelNew.forward`` ran, recorded under a TorchDispatchMode, and the
findings they give (``torch-compute-op``, ``torch-op-allowed``; ``lazy-tensor`` for the output's type). Worker side;
torch imported lazily. runtime.py's docstring has the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelpilot.evaluation.correctness.compare import flatten_outputs
from kernelpilot.rules import Rules, get_rules
from kernelpilot.verdict import Finding

if TYPE_CHECKING:
    from kernelpilot.evaluation.correctness.compare import Outputs
    from kernelpilot.evaluation.correctness.inputs import Inputs
    from kernelpilot.evaluation.correctness.reference import Forward

MEMORY_OPS: frozenset[str] = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full full_like
new_zeros new_ones new_full scalar_tensor fill fill_ zero_ copy_ copy clone _to_copy to _copy_from
_copy_from_and_resize contiguous view view_as _unsafe_view reshape _reshape_alias as_strided as_strided_
t transpose transpose_ permute expand expand_as squeeze squeeze_ unsqueeze unsqueeze_ flatten unflatten
slice select narrow split split_with_sizes chunk unbind cat stack detach detach_ alias lift_fresh
lift_fresh_copy resize_ set_ _local_scalar_dense item is_nonzero is_same_size sym_size sym_stride
sym_numel sym_storage_offset size stride dim numel record_stream constant_pad_nd arange movedim
_has_compatible_shallow_copy_type empty_permuted view_as_real view_as_complex _conj _neg_view
""".split())

LIBRARY_OPS: dict[str, frozenset[str]] = {
    "cublas": frozenset("mm bmm addmm addmv mv dot matmul linear baddbmm addbmm _scaled_mm _addmm_activation".split()),
    "cudnn": frozenset("convolution _convolution cudnn_convolution conv1d conv2d conv3d conv_transpose1d "
                       "conv_transpose2d conv_transpose3d cudnn_batch_norm _cudnn_rnn".split()),
    "attention": frozenset("scaled_dot_product_attention _scaled_dot_product_flash_attention "
                           "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention".split()),
}
LIBRARY_OPS["torch.matmul"] = LIBRARY_OPS["cublas"]


def library_op(name: str) -> bool:
    """An aten op whose kernels belong to cuBLAS, cuDNN or an attention library ("aten::cudnn_convolution")."""
    base = name.split("::")[-1].split(".")[0]
    return base.startswith("cudnn_") or any(base in ops for ops in LIBRARY_OPS.values())


def allowed_op_names(allowed_libraries: list[str]) -> set[str]:
    names: set[str] = set()
    for lib in allowed_libraries:
        key = lib.strip().lower()
        if key in LIBRARY_OPS:
            names |= LIBRARY_OPS[key]
        else:  # "aten.softmax", "torch.softmax", "softmax"
            names.add(key.split(".")[-1])
    return {n.strip("_") for n in names}


# ---- dispatch recording -------------------------------------------------------------------------
@dataclass
class OpUse:
    name: str
    namespace: str
    max_numel: int
    count: int = 1
    off_stream: int = 0  # calls made while the current CUDA stream was not the caller's


def record_ops(fn: Forward, inputs: Inputs) -> tuple[dict[str, OpUse], Outputs]:
    """Run ``fn(*inputs)`` once under a TorchDispatchMode and return the aten ops it executed."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    ops: dict[str, OpUse] = {}
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    home = torch.cuda.current_stream().cuda_stream if cuda else None

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            off = int(home is not None and torch.cuda.current_stream().cuda_stream != home)
            out = func(*args, **kwargs)
            packet = getattr(func, "_overloadpacket", func)
            name = getattr(packet, "__name__", str(func)).split(".")[-1]
            namespace = getattr(func, "namespace", "aten")
            leaves = tree_flatten((args, kwargs, out))[0]
            numel = max((t.numel() for t in leaves if isinstance(t, torch.Tensor)), default=0)
            use = ops.get(name)
            if use is None:
                ops[name] = OpUse(name, namespace, numel, off_stream=off)
            else:
                use.count += 1
                use.max_numel = max(use.max_numel, numel)
                use.off_stream += off
            return out

    with torch.no_grad(), _Recorder():
        out = fn(*inputs)
    return ops, out


def op_findings(ops: dict[str, OpUse], allowed_libraries: list[str], small_numel: int,
                rules: "str | Rules" = "kernelpilot") -> list[Finding]:
    """Findings for the compute ops forward ran. Under a KernelBench preset (KernelBench lets a
    ModelNew keep PyTorch ops) each is listed as a ``torch-op-allowed`` warning instead."""
    preset = get_rules(rules)
    allowed = allowed_op_names(allowed_libraries)
    findings = []
    for use in ops.values():
        base = use.name.rstrip("_") if use.name not in MEMORY_OPS else use.name
        if use.namespace not in ("aten", "prims") or use.name in MEMORY_OPS or base in MEMORY_OPS:
            continue
        if use.name.strip("_") in allowed or base.strip("_") in allowed:  # "softmax" allows aten._softmax
            continue
        small = use.max_numel < small_numel
        if preset.kernelbench:
            findings.append(Finding(
                rule="torch-op-allowed", severity="warn", evidence=f"aten.{use.name}",
                message=(f"ModelNew.forward ran the PyTorch operator aten.{use.name} ({use.count}x, up to "
                         f"{use.max_numel} elements); KernelBench's rules allow it.")))
            continue
        findings.append(Finding(
            rule="torch-compute-op", severity=preset.torch_op_severity(small), evidence=f"aten.{use.name}",
            message=(f"ModelNew.forward ran the PyTorch operator aten.{use.name} ({use.count}x, up to "
                     f"{use.max_numel} elements); "
                     + ("it only touches small tensors, so it is a warning." if small else
                        "write it as a kernel, or allow it with allowed_libraries in the project config."))))
    return findings


def output_type_findings(out: object) -> list[Finding]:
    import torch

    bad = [type(o) for o in flatten_outputs(out) if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor]
    if not bad:
        return []
    return [Finding(rule="lazy-tensor", evidence=bad[0].__qualname__,
                    message=f"forward returned a {bad[0].__qualname__} (a torch.Tensor subclass); return plain "
                            "tensors.")]
