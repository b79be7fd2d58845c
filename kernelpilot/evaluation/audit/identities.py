"""The harness's own functions (timers, torch.cuda, the checks), captured before any candidate code runs and
compared after each step: one a candidate replaced is a ``timer-patch`` or ``patched-function`` finding, and the
worker is never reused. runtime.py's docstring has the rules.
"""

from __future__ import annotations

import importlib

from kernelpilot.verdict import Finding

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
    "kernelpilot.evaluation.correctness.compare._fused_compare",
    "kernelpilot.evaluation.correctness.compare._torch_passes",
    "kernelpilot.evaluation.correctness.verify.verify", "kernelpilot.evaluation.correctness.verify.poison_allocator",
    "kernelpilot.evaluation.correctness.verify.inputs_equal",
    "kernelpilot.evaluation.correctness.reference_cache.ReferenceCache.lookup",
    "kernelpilot.evaluation.correctness.reference_cache.ReferenceCache.store",
    "kernelpilot.evaluation.correctness.reference_cache.fingerprint",
    "kernelpilot.evaluation.timing.interleaved.measure",
    "kernelpilot.evaluation.protocol.send", "kernelpilot.evaluation.worker.pipeline.run_candidate",
    "kernelpilot.evaluation.audit.ops.op_findings", "kernelpilot.evaluation.audit.kernels.kernel_findings",
    "kernelpilot.evaluation.audit.threads.thread_findings",
)
_TIMERS = ("time.", "torch.cuda.Event", "torch.cuda.synchronize")


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


class Identities:
    """The objects behind timers and checker functions, captured before any candidate code runs."""

    def __init__(self) -> None:
        self.original: dict[str, object] = {}
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
