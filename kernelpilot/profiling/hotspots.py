"""`kernelpilot hotspots SCRIPT`: run a PyTorch script, rank its operators by GPU time, extract one.

The script runs in this process under a TorchDispatchMode that sees every ATen call with its real
arguments (shapes, dtypes, dims, eps, …) and times it: CUDA events around each call on the GPU,
the host clock on the CPU. Calls are grouped by operator and argument signature, ranked by total
time, and any entry can be written out as a KernelBench problem file that calls the same operator
with the same shapes and dtypes, ready for `kernelpilot`. ``--steps N`` stops the script after N
calls of its outermost nn.Module (so a training loop need not run to the end).
"""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.extract import write_problem
from kernelpilot.profiling.grouped import grouped_command
from kernelpilot.profiling.records import Hotspot, TensorArg
from kernelpilot.profiling.script_run import misplaced_note, script_failure

# Metadata-only operators: no kernel runs, nothing to optimise.
_SKIP = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::expand", "aten::t", "aten::transpose",
    "aten::permute", "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::detach",
    "aten::alias", "aten::as_strided", "aten::empty", "aten::empty_strided", "aten::empty_like",
    "aten::_reshape_alias", "aten::lift_fresh", "aten::split", "aten::unbind", "aten::chunk",
}


class _StopScript(BaseException):
    """Raised inside the script once --steps forward calls were recorded."""


def _spec(v: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        arg = TensorArg(tuple(v.shape), str(v.dtype))
        if not v.is_floating_point() and not v.is_complex() and v.numel() and v.dtype != torch.bool:
            arg.low, arg.high = int(v.min()), int(v.max())
        return arg
    if isinstance(v, (list, tuple)):
        return [_spec(x) for x in v]
    if isinstance(v, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return v
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return f"<{type(v).__name__}>"


class HotspotRecorder:
    """Records and times every ATen call made while active."""

    def __init__(self, steps: int | None = None) -> None:
        self.steps = steps
        self.entries: dict[str, Hotspot] = {}
        self._forward_depth = 0
        self._steps_done = 0

    def run_script(self, script: Path, argv: list[str]) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
                return recorder._call(func, args, kwargs or {})

        def pre_hook(module: Any, inputs: Any) -> None:
            self._forward_depth += 1

        def post_hook(module: Any, inputs: Any, output: Any) -> None:
            self._forward_depth -= 1
            if self._forward_depth == 0:
                self._steps_done += 1
                if self.steps is not None and self._steps_done >= self.steps:
                    raise _StopScript()

        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        handles = [register_module_forward_pre_hook(pre_hook), register_module_forward_hook(post_hook)]
        old_argv = sys.argv
        sys.argv = [str(script), *argv]
        try:
            with Mode():
                runpy.run_path(str(script), run_name="__main__")
        except _StopScript:
            pass
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise KernelpilotError(f"{script} exited with status {exc.code}; run it on its own first and "
                                       "fix it.") from exc
        except KernelpilotError:
            raise
        except Exception as exc:  # the script's own exception: one line, where it happened in its code
            raise script_failure(script, exc) from exc
        finally:
            sys.argv = old_argv
            for h in handles:
                h.remove()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self._collect()

    def _call(self, func: Any, args: tuple, kwargs: dict) -> Any:
        import torch

        name = func._schema.name
        if name in _SKIP:
            return func(*args, **kwargs)
        on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in _flat(args))
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = func(*args, **kwargs)
            end.record()
        else:
            t0 = time.perf_counter()
            out = func(*args, **kwargs)
            elapsed = (time.perf_counter() - t0) * 1e3
        spec_args, spec_kwargs = [_spec(a) for a in args], {k: _spec(v) for k, v in kwargs.items()}
        entry = Hotspot(name, func._overloadname, spec_args, spec_kwargs)
        entry = self.entries.setdefault(entry.signature(), entry)
        entry.calls += 1
        if on_gpu:
            entry.pending.append((start, end))
        else:
            entry.total_ms += elapsed
        return out

    def _collect(self) -> None:
        for e in self.entries.values():
            e.total_ms += sum(s.elapsed_time(t) for s, t in e.pending)
            e.pending.clear()

    def ranked(self) -> list[Hotspot]:
        return sorted(self.entries.values(), key=lambda e: e.total_ms, reverse=True)


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, (list, tuple)) else [v])
    return out


def ranking_table(entries: list[Hotspot], top: int = 15) -> str:
    total = sum(e.total_ms for e in entries) or 1.0
    lines = [f"{'#':>3}  {'ms':>9}  {'%':>5}  {'calls':>5}  operator(arguments)"]
    for i, e in enumerate(entries[:top], 1):
        lines.append(f"{i:>3}  {e.total_ms:9.3f}  {100 * e.total_ms / total:5.1f}  {e.calls:>5}  {e.signature()}")
    return "\n".join(lines)


def hotspots_command(args: Any) -> int:
    """CLI: rank the script's operators; with --extract N, write hotspot N as a problem file."""
    script = Path(args.script)
    if not script.is_file():
        raise KernelpilotError(f"{script} does not exist; pass the path of a Python script that runs your model.")
    note = misplaced_note(args, script)
    if note:
        print(note, file=sys.stderr)
    if getattr(args, "group", "op") in ("module", "fusion"):
        return grouped_command(args)
    recorder = HotspotRecorder(steps=getattr(args, "steps", None))
    recorder.run_script(script, list(getattr(args, "args", None) or getattr(args, "script_args", None) or []))
    entries = recorder.ranked()
    if not entries:
        raise KernelpilotError(f"{script} ran no PyTorch operators; check that it calls your model.")
    top = getattr(args, "top", None) or 15
    print(ranking_table(entries, top=top))
    extract = getattr(args, "extract", None)
    if extract is not None:
        if not isinstance(extract, int):
            raise KernelpilotError(f"--extract {extract!r}: with --group op pass a row number (1 to {len(entries)}).")
        if not 1 <= extract <= len(entries):
            raise KernelpilotError(f"--extract {extract} is out of range; choose 1 to {len(entries)}.")
        total = sum(e.total_ms for e in entries) or 1.0
        entry = entries[extract - 1]
        path = write_problem(entry, Path(getattr(args, "out", None) or "problems"), script=str(script),
                             share_pct=100 * entry.total_ms / total, rank=extract)
        print(f"wrote {path}: run `kernelpilot {path}` to pair on it")
    return 0
