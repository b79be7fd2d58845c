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

The checks live by responsibility: ops.py (the operator recorder, its findings and the output's type),
kernels.py (the kernels and streams of one profiled call, from kernel_trace.py and stream_joins.py), threads.py
(threads started across calls) and identities.py (the harness functions captured at start-up). This module
gathers their names, as the worker and the tests have always called them.
"""

from __future__ import annotations

from kernelpilot.evaluation.audit.identities import Identities  # noqa: F401
from kernelpilot.evaluation.audit.kernel_trace import KernelTrace, profile_call  # noqa: F401
from kernelpilot.evaluation.audit.kernels import kernel_findings, library_launched  # noqa: F401
from kernelpilot.evaluation.audit.ops import (  # noqa: F401
    LIBRARY_OPS,
    MEMORY_OPS,
    OpUse,
    allowed_op_names,
    library_op,
    op_findings,
    output_type_findings,
    record_ops,
)
from kernelpilot.evaluation.audit.threads import (  # noqa: F401
    ThreadSnapshot,
    ThreadWatch,
    harness_thread,
    thread_findings,
)
