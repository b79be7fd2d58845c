"""Run a user's PyTorch script in this process for its first N steps.

A *step* begins each time the script calls its model: the first ``nn.Module`` it calls from the top
level (its *root*), again at the top level. The script is stopped (by an exception it cannot catch
by accident) when step N+1 would begin, so step N's backward and optimizer step are included.

``torch.compile`` inside the script is neutralised: ``torch.compile(fn)`` returns ``fn`` and
``Module.compile()`` does nothing, so the eager model is what runs. The dispatch-level view of
hotspots and apply does not see Inductor's kernels; :class:`ScriptRun` records that it happened so
the caller can say so. Autocast regions are noticed (``autocast``) and left as they are.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError, ScriptError


class StopScript(BaseException):
    """Raised inside the script when the requested steps are done."""


@dataclass
class ScriptRun:
    """What one run of the script did."""

    steps: int = 0
    compile_calls: int = 0
    autocast: bool = False
    grad_steps: int = 0  # steps in which the root ran with grad enabled
    step_starts: list[float] = field(default_factory=list)  # host clock at each step start (synchronized)
    end: float = 0.0
    root: Any = None

    def step_times_ms(self) -> list[float]:
        marks = [*self.step_starts, self.end] if self.end else list(self.step_starts)
        return [(b - a) * 1e3 for a, b in zip(marks, marks[1:])]

    def notes(self) -> list[str]:
        out = []
        if self.compile_calls:
            out.append("the script calls torch.compile: the eager model was profiled instead (this dispatch-level view "
                       "does not see Inductor's kernels); the `compiled` column of --group fusion says what Inductor "
                       "fuses, and `kernelpilot apply --compile` measures the swapped model under torch.compile")
        if self.autocast:
            out.append("the script runs under autocast: the operators were recorded after autocast's casts, which "
                       "appear as explicit aten::_to_copy calls and are kept in extracted problems")
        return out


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextlib.contextmanager
def _eager_only(run: ScriptRun) -> Iterator[None]:
    import torch

    original_compile = torch.compile
    original_method = torch.nn.Module.compile

    def compile_(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        run.compile_calls += 1
        if model is None:  # used as @torch.compile(...)
            return lambda fn: fn
        return model

    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        run.compile_calls += 1

    torch.compile = compile_  # type: ignore[assignment]
    torch.nn.Module.compile = method  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.compile = original_compile  # type: ignore[assignment]
        torch.nn.Module.compile = original_method  # type: ignore[method-assign]


def run_script(script: Path, argv: list[str], *, steps: int | None, context: Any = None,
               on_root: Callable[[Any], None] | None = None, on_step: Callable[[int], None] | None = None,
               keep_compile: bool = False) -> ScriptRun:
    """Run ``script`` until ``steps`` steps are done (or it ends). ``context`` (a context manager) is
    entered around the script; ``on_root(module)`` is called once the root is known, before its first
    forward; ``on_step(i)`` at each step start (0-based). ``keep_compile`` leaves torch.compile alone."""
    import torch
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    if not script.is_file():
        raise KernelpilotError(f"{script} does not exist; pass the path of a Python script that runs your model.")
    run = ScriptRun()
    depth = [0]

    def pre_hook(module: Any, inputs: Any) -> None:
        if depth[0] == 0:
            if run.root is None:
                run.root = module
                if on_root is not None:
                    on_root(module)
            if module is run.root:
                if steps is not None and run.steps >= steps:
                    raise StopScript()
                _synchronize()
                run.step_starts.append(time.perf_counter())
                if torch.is_grad_enabled():
                    run.grad_steps += 1
                if any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda")):
                    run.autocast = True
                if on_step is not None:
                    on_step(run.steps)
                run.steps += 1
        depth[0] += 1

    def post_hook(module: Any, inputs: Any, output: Any) -> None:
        depth[0] -= 1

    handles = [register_module_forward_pre_hook(pre_hook), register_module_forward_hook(post_hook)]
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *argv]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        with contextlib.ExitStack() as stack:
            if not keep_compile:
                stack.enter_context(_eager_only(run))
            if context is not None:
                stack.enter_context(context)
            runpy.run_path(str(script), run_name="__main__")
    except StopScript:
        pass
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise KernelpilotError(f"{script} exited with status {exc.code}; run it on its own first and "
                                   "fix it.") from exc
    except KernelpilotError:
        raise
    except Exception as exc:  # the script's own exception: one line, where it happened in the script's code
        raise script_failure(script, exc) from exc
    finally:
        _synchronize()
        run.end = time.perf_counter()
        sys.argv, sys.path[:] = old_argv, old_path
        for h in handles:
            h.remove()
    if run.root is None:
        raise KernelpilotError(f"{script} called no nn.Module; kernelpilot needs a script that runs a torch.nn.Module "
                               "model.")
    return run


def script_failure(script: Path, exc: BaseException) -> ScriptError:
    """The script's own exception as one line: its type and message, and the innermost line of the script's
    code (its folder, not an installed package) it passed through, e.g. ``train.py:12 (in forward)``."""
    frames = traceback.extract_tb(exc.__traceback__)
    home = script.resolve().parent

    def mine(filename: str) -> bool:
        try:
            path = Path(filename).resolve()
        except OSError:
            return False
        return path.is_relative_to(home) and not {"site-packages", "dist-packages"} & set(path.parts)

    ours = [f for f in frames if mine(f.filename)]
    frame = ours[-1] if ours else (frames[-1] if frames else None)
    where = f" at {_shown(Path(frame.filename))}:{frame.lineno} (in {frame.name})" if frame is not None else ""
    lines = str(exc).strip().splitlines()
    said = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    summary = f"{script} raised {said}{where}"
    return ScriptError(f"{summary}; run it on its own (python {script}) for the whole traceback, fix it, and try "
                       "again.",
                       summary=summary)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def misplaced_options(args: Any) -> list[str]:
    """kernelpilot's own options given after SCRIPT (so passed to the script, as everything after it is)."""
    own = set(getattr(args, "own_options", None) or ())
    return [t for t in (getattr(args, "script_args", None) or []) if t.split("=", 1)[0] in own]


def misplaced_note(args: Any, script: Path) -> str:
    """A note for options after SCRIPT that are also kernelpilot's ("" when there are none)."""
    found = misplaced_options(args)
    if not found:
        return ""
    names = ", ".join(dict.fromkeys(t.split("=", 1)[0] for t in found))
    return (f"note: {names} came after {script}, so {'it goes' if len(found) == 1 else 'they go'} to {script.name} "
            f"as its own argument{'s' if len(found) > 1 else ''}, not to kernelpilot; kernelpilot's options go before "
            "SCRIPT.")


def median_step_ms(script: Path, argv: list[str], steps: int, *, warmup: int = 1) -> tuple[float, float]:
    """(median, spread) of the uninstrumented step time in ms: the script as is, host clock between
    step starts (synchronized on the GPU); the first ``warmup`` steps are left out."""
    run = run_script(script, argv, steps=steps)
    times = run.step_times_ms()[warmup:] or run.step_times_ms()
    return median_spread(times)


def median_spread(times: list[float]) -> tuple[float, float]:
    """(median, spread) of ``times``: the spread is the 10th to 90th percentile range."""
    if not times:
        return 0.0, 0.0
    ordered = sorted(times)
    mid = (ordered[len(ordered) // 2] if len(ordered) % 2
           else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2)
    lo, hi = ordered[int(0.1 * (len(ordered) - 1))], ordered[int(0.9 * (len(ordered) - 1))]
    return mid, hi - lo
