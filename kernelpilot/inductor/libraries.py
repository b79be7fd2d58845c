"""Which library a kept PyTorch call belongs to, as the candidate declares it in ``KERNELPILOT_LIBRARIES``.

torch.compile does not generate every kernel it runs: Inductor calls cuBLAS and cuDNN through
``extern_kernels`` (mm, addmm, bmm, convolution), falls back to ATen operators it has no lowering for
(``torch.ops.aten.avg_pool3d``, ``_scaled_dot_product_efficient_attention``,
``_transformer_encoder_layer_fwd``, ``aten.randint.low_out`` for the seeds of its random kernels), and
dynamo leaves whatever it cannot trace (an ``nn.LSTM``, the code after a graph break) to eager PyTorch.
The candidate made from torch.compile's output runs the same calls, and declares each: a library name
the engine knows (``cublas``, ``cudnn``, ``attention``: every ATen operator of that library is then
allowed, see ``kernelpilot.evaluation.audit.runtime.LIBRARY_OPS``) or the ATen operator itself
(``aten.avg_pool3d``). The engine allows exactly the declared ones for that candidate and lists each in
the verdict (finding ``library-call``).
"""

from __future__ import annotations

# Inductor's extern_kernels.<name> -> the torch call that does the same, and its library
EXTERN_CALLS: dict[str, tuple[str, str]] = {
    "mm": ("torch.mm", "cublas"), "addmm": ("torch.addmm", "cublas"), "bmm": ("torch.bmm", "cublas"),
    "baddbmm": ("torch.baddbmm", "cublas"), "convolution": ("torch.convolution", "cudnn"),
}

# ATen fallbacks whose kernels are a library's: declared by that library, plus the operator itself when
# the engine's table of that library does not name it
_ATEN_LIBRARIES: dict[str, tuple[str, ...]] = {
    "_scaled_dot_product_efficient_attention": ("attention",),
    "_scaled_dot_product_flash_attention": ("attention",),
    "_scaled_dot_product_cudnn_attention": ("attention",),
    "scaled_dot_product_attention": ("attention",),
    "convolution": ("cudnn",), "cudnn_convolution": ("cudnn",), "_cudnn_rnn": ("cudnn",),
    "mm": ("cublas",), "addmm": ("cublas",), "bmm": ("cublas",), "baddbmm": ("cublas",),
    # one fused encoder layer: its projections and feed-forward are cuBLAS GEMMs launched inside the op
    "_transformer_encoder_layer_fwd": ("aten._transformer_encoder_layer_fwd", "cublas", "attention"),
    "_native_multi_head_attention": ("aten._native_multi_head_attention", "cublas", "attention"),
    # batch and instance norm: the CPU and meta devices run native_batch_norm, CUDA cuDNN's when it can
    "native_batch_norm": ("aten.native_batch_norm", "aten.cudnn_batch_norm"),
    "_native_batch_norm_legit": ("aten._native_batch_norm_legit", "aten.cudnn_batch_norm"),
}

# torch functions of eager code (dynamo's graph breaks, modules it leaves to eager): the libraries
# their CUDA kernels come from. An RNN module runs cuDNN's RNN (aten._cudnn_rnn) on the GPU, whatever
# the CPU or meta device decomposes it into.
TORCH_FUNCTION_LIBRARIES: dict[str, tuple[str, ...]] = {
    "lstm": ("cudnn",), "gru": ("cudnn",), "rnn_tanh": ("cudnn",), "rnn_relu": ("cudnn",),
    "linear": ("cublas",), "matmul": ("cublas",), "mm": ("cublas",), "bmm": ("cublas",), "addmm": ("cublas",),
    "baddbmm": ("cublas",), "einsum": ("cublas",),
    "conv1d": ("cudnn",), "conv2d": ("cudnn",), "conv3d": ("cudnn",), "conv_transpose1d": ("cudnn",),
    "conv_transpose2d": ("cudnn",), "conv_transpose3d": ("cudnn",),
    "scaled_dot_product_attention": ("attention",),
}
RNN_MODULES = ("RNN", "LSTM", "GRU")


def aten_declaration(op: str) -> tuple[str, ...]:
    """What declares ATen operator ``op`` (packet name, e.g. ``avg_pool3d``, ``randint``)."""
    return _ATEN_LIBRARIES.get(op, (f"aten.{op}",))


def add(declared: list[str], entries: tuple[str, ...] | list[str]) -> None:
    """Append ``entries`` to ``declared``, each once, in first-use order."""
    for entry in entries:
        if entry not in declared:
            declared.append(entry)
