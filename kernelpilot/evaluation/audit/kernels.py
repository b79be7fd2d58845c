"""The kernel audit: which kernels one profiled call of ``ModelNew.forward`` ran (kernel_trace.py) and on which
streams, and the findings they give (``no-custom-kernel``, ``library-only``, ``library-kernel``, ``side-stream``,
``profiler-unavailable``). Pure Python over the trace. runtime.py's docstring has the rules.
"""

from __future__ import annotations

import re

from kernelpilot.evaluation.audit.kernel_trace import KernelTrace
from kernelpilot.evaluation.audit.ops import library_op
from kernelpilot.evaluation.audit.stream_joins import joined_streams
from kernelpilot.evaluation.static.cute_names import names_dsl_kernel
from kernelpilot.rules import Rules, get_rules
from kernelpilot.verdict import Finding


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
    # a CuTe-DSL kernel is named kernel_cutlass_<its @cute.kernel function>_<argument types>_<n> (cute_names.py):
    # the candidate's own; CUTLASS's library kernels (cutlass_80_..., cutlass3x_..., cutlass::Kernel) are not
    own = [k for i, k in enumerate(names) if not by_op[i] and (
           any(names_dsl_kernel(k, b) for b in own_bases)
           or _own_by_name(k, own_kernels)
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
