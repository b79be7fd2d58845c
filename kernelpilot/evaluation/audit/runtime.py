"""Runtime audit: what actually ran inside ``ModelNew.forward`` (worker side; torch imported lazily).

Checks (each failure is a Finding with a stable rule id):

- ``torch-compute-op``: aten operators recorded with a TorchDispatchMode while forward runs (this also
  sees ops a C++ binding calls through ATen). Classification:
  * fine (memory, never a finding): allocation (empty*, zeros*, ones*, full*, new_*), fill_/zero_,
    copies and casts (copy_, clone, _to_copy, contiguous, cat/stack, constant_pad_nd), views and
    shape ops (view, reshape, as_strided, transpose, permute, expand, squeeze, slice, select, split,
    unbind, ...), and metadata (size, stride, item, ...);
  * everything else is compute: matmul/conv/softmax/norms/attention/reductions/sort/indexing and
    elementwise math. Elementwise math counts too: a forward that does ``x * 2`` in torch has not
    written a kernel. A compute op whose tensors all have fewer than ``small_numel`` elements (a
    scale computed on a scalar, say) is a ``warn``; on larger tensors it is a ``reject``, unless
    ``allowed_libraries`` names it (library names below, or the aten op name itself).
  * ops outside the aten/prims namespaces (the candidate's own TORCH_LIBRARY ops) are fine.
- ``no-custom-kernel``: torch.profiler (CUDA activity) must show at least one kernel of the candidate's
  own (a name from the build report's ptxas list, else one not from torch/cuBLAS/cuDNN/Triton). A
  candidate that compiled no kernel at all and runs only kernels of a library the project allows gets
  ``library-only`` (warn) instead: "call cuBLAS and fuse around it" is an honest answer.
- ``library-kernel``: cuBLAS/cuDNN kernels launched without an aten op (raw library calls), unless allowed.
- ``side-stream``: a kernel/copy on a stream other than the one the caller's marker kernel ran on, unless
  that stream is joined to the caller's both ways (stream_joins.py).
- ``background-thread``: Python threads that appear across candidate calls (``native-thread`` warn for
  OS threads, which drivers may also start).
- ``patched-function``/``timer-patch``: identity of timers, torch.cuda and checker functions
  compared with the objects captured when the worker started, before any candidate code.
- ``lazy-tensor``: an output that is a torch.Tensor subclass (also refused by verify's type check).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

from kernelpilot.evaluation.audit.kernel_trace import KernelTrace, profile_call  # noqa: F401  (re-exported)
from kernelpilot.evaluation.audit.stream_joins import joined_streams
from kernelpilot.rules import Rules, get_rules
from kernelpilot.verdict import Finding

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


def library_launched(trace: KernelTrace, index: int) -> bool:
    """Kernel ``index`` of ``trace`` was launched inside a library op while every op ran on the caller's
    stream: a library's own internal stream (kernel_trace.py), not the candidate's side stream."""
    if not trace.watched_dispatch or trace.off_stream_ops or index >= len(trace.launched_by):
        return False
    return any(library_op(op) for op in trace.launched_by[index])

_LIBRARY_KERNEL = re.compile(r"(nvjet|sm\d+_xmma|xmma_|cublas|cudnn|gemv2|gemmk1|gemmSN|ampere_|turing_|volta_|"
                             r"cutlass_\d+_|cutlass3x_|implicit_convolve|splitKreduce)", re.I)
_TORCH_KERNEL = re.compile(r"(at::|at_cuda_detail|c10::|triton_|^triton|cub::|thrust::|Memcpy|Memset|"
                           r"elementwise_kernel|reduce_kernel|softmax_warp|cunn_)")


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


def record_ops(fn: Callable[..., Any], inputs: list[Any]) -> tuple[dict[str, OpUse], Any]:
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


# ---- profiler: kernel_trace.py ------------------------------------------------------------------
def _base_name(kernel: str) -> str:
    """A kernel's bare name from its demangled signature: "void at::native::(anonymous namespace)::
    avg_pool3d_cuda_update_output<3, float, float>(...)" -> "avg_pool3d_cuda_update_output" (the
    anonymous namespace's parentheses are not the parameter list)."""
    name = re.sub(r"^void\s+", "", kernel.strip()).replace("(anonymous namespace)", "")
    name = name.split("(")[0].split("<")[0]
    return name.split("::")[-1].strip()


def _names_kernel(kernel: str, base: str) -> bool:
    """Whether a recorded kernel name is ``base``: as a whole identifier of a demangled name (a template
    argument or a namespace around it), or length-prefixed in a mangled one (``_Z11gelu_kernelPKf``). Never
    a bare substring: an own kernel named ``kernel`` would make every torch kernel the candidate's."""
    if not base:
        return False
    if re.search(rf"(?<![A-Za-z0-9_]){re.escape(base)}(?![A-Za-z0-9_])", kernel):
        return True
    return f"{len(base)}{base}" in kernel and kernel.startswith("_Z")


# namespaces of torch and the libraries it ships kernels from: a recorded kernel qualified by one of them is
# theirs, even when its bare name is an own kernel's, unless the candidate declared its kernel there too
_LIBRARY_NAMESPACES = {"at", "c10", "at_cuda_detail", "cub", "thrust", "cutlass", "cute", "flash", "pytorch_flash"}


def _qualifier(kernel: str) -> str:
    """The namespaces before a demangled kernel's bare name: "void at::native::k<4, F>(int)" -> "at::native"
    (template arguments and the anonymous namespace left out); "" when unqualified or mangled."""
    name = re.sub(r"^void\s+", "", kernel.strip()).replace("(anonymous namespace)::", "")
    name = name.split("(")[0].split("<")[0]
    return name.rsplit("::", 1)[0].strip() if "::" in name else ""


def _own_by_name(kernel: str, own: list[str]) -> bool:
    """Whether a recorded kernel's bare name is one of the candidate's kernels, in the candidate's namespace:
    torch's ``at::native::vectorized_elementwise_kernel`` is not an own kernel of that bare name."""
    base = _base_name(kernel)
    quals = {_qualifier(k) for k in own if k and _base_name(k) == base}
    if not quals:
        return False
    qual = _qualifier(kernel)
    if qual.split("::")[0] not in _LIBRARY_NAMESPACES:
        return True
    return qual in quals  # a kernel the candidate declared in that namespace itself


def kernel_findings(trace: KernelTrace, own_kernels: list[str], allowed_libraries: list[str],
                    rules: "str | Rules" = "kernelpilot") -> list[Finding]:
    """Kernel and stream rules. Under a KernelBench preset library kernels (what the allowed PyTorch
    ops run: cuBLAS, cuDNN) are a warning; the candidate must still run a kernel of its own."""
    findings: list[Finding] = []
    if trace.home_stream is None:  # not even the marker kernel: the profiler saw no GPU activity
        return [Finding(rule="profiler-unavailable", severity="warn",
                        message="torch.profiler recorded no GPU activity; kernel and stream checks were skipped.")]
    own_bases = {_base_name(k) for k in own_kernels if k}
    names = [k for k, _ in trace.kernels]
    # a kernel launched inside an aten op's CPU range is that op's (torch's, or the library it calls): whatever its
    # name, never the candidate's. The H100 run of 2026-12-05 called a try/except whose fallback ran nn.Linear ok:
    # cuBLAS's small-GEMM kernel there matched none of the library names below and was taken for an own kernel.
    by_op = [i < len(trace.launched_by) and any(op.startswith("aten::") for op in trace.launched_by[i])
             for i in range(len(names))]
    # the build report's ptxas names (demangled or not), or else any kernel not from torch/cuBLAS/cuDNN/Triton;
    # a bare name alike is not enough when the recorded kernel sits in torch's namespaces and the own one does not
    own = [k for i, k in enumerate(names) if not by_op[i] and (
           _own_by_name(k, own_kernels)
           or any(_names_kernel(k, b) for b in own_bases if b != _base_name(k))
           or (not _LIBRARY_KERNEL.search(k) and not _TORCH_KERNEL.search(k)))]
    libraries_allowed = bool({"cublas", "cudnn", "torch.matmul"} & {lib.lower() for lib in allowed_libraries})
    lib_kernels = [k for i, k in enumerate(names) if k not in own and (
        _LIBRARY_KERNEL.search(k) or (by_op[i] and any(library_op(op) for op in trace.launched_by[i])))]
    library_only = not own and not own_bases and lib_kernels and libraries_allowed
    if library_only:
        # "call cuBLAS and fuse around it": the candidate compiled no kernels of its own and the project
        # allows the library. Torch ops that reach the library are judged by the operator audit.
        shown = ", ".join(sorted({_base_name(k) for k in lib_kernels})[:3])
        findings.append(Finding(
            rule="library-only", severity="warn", evidence=shown,
            message=f"forward's GPU work is library kernels only ({shown}), which the project allows; "
                    "the candidate compiled no kernels of its own."))
    elif not own:
        shown = ", ".join(sorted({_base_name(k) for k in names})[:6]) or "no GPU work at all"
        findings.append(Finding(
            rule="no-custom-kernel", evidence=shown,
            message=f"None of the candidate's own kernels ran during forward (seen: {shown}); call the extension."))
    if lib_kernels and not libraries_allowed:
        findings.append(Finding(
            rule="library-kernel", evidence=_base_name(lib_kernels[0]),
            severity=get_rules(rules).library_kernel_severity(),
            message=f"forward ran library kernel {_base_name(lib_kernels[0])} (cuBLAS/cuDNN); "
                    "write the kernel or allow the library in the project config."))
    if trace.home_stream is not None:
        # a library's own internal streams (cuDNN's conv_transpose dgrad engines), joined before it returns,
        # are not the candidate's: see kernel_trace.py; nor is a stream the candidate joined both ways
        joined = joined_streams(trace)
        other = sorted({(s, k) for i, (k, s) in enumerate(trace.kernels)
                        if s != trace.home_stream and s not in joined and not library_launched(trace, i)})
        if other:
            stream, kernel = other[0]
            findings.append(Finding(
                rule="side-stream", evidence=f"{_base_name(kernel)} on stream {stream}",
                message=f"kernel {_base_name(kernel)} ran on stream {stream}, not the caller's stream "
                        f"{trace.home_stream}, and that stream is not joined to it both ways (wait for the "
                        "caller's stream before the work, make the caller's stream wait for it before returning); "
                        "launch on torch's current stream, or join the stream, so the timer sees the work."))
    return findings


# ---- threads and identities ---------------------------------------------------------------------
_HARNESS_THREAD_MODULES = ("torch.", "triton.")


def harness_thread(t: threading.Thread) -> bool:
    """A thread torch or triton started for the harness (Inductor's compile-pool timer, say).

    Judged by the code the thread runs: its target function or its Thread subclass must live in
    torch or triton. The static policy already refuses ``threading`` in candidates, so a candidate
    thread running torch's own code is not a practical way around this.
    """
    target = getattr(t, "_target", None) or getattr(t, "function", None)
    modules = [getattr(target, "__module__", None) or "", type(t).__module__]
    return any(m.startswith(_HARNESS_THREAD_MODULES) for m in modules)


@dataclass
class ThreadSnapshot:
    python: frozenset[int]
    native: int

    @classmethod
    def take(cls) -> "ThreadSnapshot":
        try:
            native = len(os.listdir("/proc/self/task"))
        except OSError:
            native = 0
        return cls(frozenset(t.ident or 0 for t in threading.enumerate() if not harness_thread(t)), native)


def thread_findings(before: ThreadSnapshot, after: ThreadSnapshot, native: bool = True) -> list[Finding]:
    findings = []
    new = after.python - before.python
    if new:
        names = [t.name for t in threading.enumerate() if t.ident in new]
        findings.append(Finding(rule="background-thread", evidence=", ".join(names),
                                message=f"the candidate started {len(new)} Python thread(s) ({', '.join(names)}); "
                                        "work must finish inside forward."))
    elif native and after.native > before.native:
        findings.append(Finding(rule="native-thread", severity="warn", evidence=f"{before.native} -> {after.native}",
                                message=f"the process gained {after.native - before.native} OS thread(s) while "
                                        "the candidate ran (drivers may do this too)."))
    return findings


class ThreadWatch:
    """Names of Python threads started while active (threading.settrace fires in each new thread)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._old: Any = None

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        import sys

        current = threading.current_thread()
        if not harness_thread(current):
            self.started.append(current.name)
        sys.settrace(None)  # one record per thread, no tracing cost after that

    def __enter__(self) -> "ThreadWatch":
        self._old = threading.gettrace() if hasattr(threading, "gettrace") else None
        threading.settrace(self._hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.settrace(self._old)  # type: ignore[arg-type]

    def findings(self) -> list[Finding]:
        if not self.started:
            return []
        names = ", ".join(sorted(set(self.started)))
        return [Finding(rule="background-thread", evidence=names,
                        message=f"the candidate started {len(self.started)} Python thread(s) ({names}); "
                                "work must be done inside forward, on the caller's stream.")]


_WATCHED = (
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic", "time.process_time",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.Event.query", "torch.cuda.current_stream",
    "torch.cuda.Stream", "torch.cuda.empty_cache", "torch.cuda.mem_get_info", "torch.allclose", "torch.equal",
    "torch.isnan", "torch.isfinite", "torch.where", "torch.linalg.vector_norm", "torch.manual_seed",
    "torch.randn", "torch.rand", "torch.full", "torch.Tensor.clone", "torch.Tensor.copy_",
    "torch.Tensor.double", "torch.Tensor.__eq__", "torch.Tensor.__sub__", "torch.Tensor.abs",
    "torch.Tensor.all", "torch.Tensor.sum", "torch.nn.Module.__call__", "torch.profiler.profile",
    "threading.enumerate", "threading.active_count", "select.select", "os.write", "json.dumps",
    "kernelpilot.evaluation.correctness.verify.compare", "kernelpilot.evaluation.correctness.verify.compare_all",
    "kernelpilot.evaluation.correctness.compare.compare", "kernelpilot.evaluation.correctness.compare.compare_all",
    "kernelpilot.evaluation.correctness.compare._fused_compare", "kernelpilot.evaluation.correctness.compare._torch_passes",
    "kernelpilot.evaluation.correctness.verify.verify", "kernelpilot.evaluation.correctness.verify.poison_allocator",
    "kernelpilot.evaluation.correctness.verify.inputs_equal", "kernelpilot.evaluation.correctness.reference_cache.ReferenceCache.lookup",
    "kernelpilot.evaluation.correctness.reference_cache.ReferenceCache.store", "kernelpilot.evaluation.correctness.reference_cache.fingerprint",
    "kernelpilot.evaluation.timing.interleaved.measure",
    "kernelpilot.evaluation.protocol.send", "kernelpilot.evaluation.worker.pipeline.run_candidate", "kernelpilot.evaluation.audit.runtime.op_findings",
    "kernelpilot.evaluation.audit.runtime.kernel_findings", "kernelpilot.evaluation.audit.runtime.thread_findings",
)
_TIMERS = ("time.", "torch.cuda.Event", "torch.cuda.synchronize")


def _resolve(dotted: str) -> Any:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


class Identities:
    """The objects behind timers and checker functions, captured before any candidate code runs."""

    def __init__(self) -> None:
        self.original: dict[str, Any] = {}
        for name in _WATCHED:
            try:
                self.original[name] = _resolve(name)
            except Exception:  # not present in this torch version
                continue

    def changed(self) -> list[str]:
        out = []
        for name, obj in self.original.items():
            try:
                now = _resolve(name)
            except Exception:
                out.append(name)
                continue
            if now is not obj:
                out.append(name)
        return out

    def findings(self, when: str) -> list[Finding]:
        return [Finding(rule="timer-patch" if name.startswith(_TIMERS) else "patched-function", evidence=name,
                        message=f"{name} was replaced {when}; the harness functions must not be patched.")
                for name in self.changed()]


def output_type_findings(out: Any) -> list[Finding]:
    import torch

    from kernelpilot.evaluation.correctness.verify import flatten_outputs

    bad = [type(o) for o in flatten_outputs(out) if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor]
    if not bad:
        return []
    return [Finding(rule="lazy-tensor", evidence=bad[0].__qualname__,
                    message=f"forward returned a {bad[0].__qualname__} (a torch.Tensor subclass); return plain tensors.")]
