"""Compiles a candidate starts while it runs: judged as build time, never as a hang (worker side).

Model-written KernelBench solutions call ``load_inline`` (or ``cpp_extension.load``) anywhere: at module
top level (the build step compiles it), in ``ModelNew.__init__`` (the build step tries to build
ModelNew to compile it; see build.py), in ``forward`` on the first call, in an autograd Function, with
sources assembled at run time. Whatever still compiles inside the worker goes through ``install``'s
wrappers, which

- tell the hang watchdog that a compile runs (``watchdog.compiling``: the build limit for it, the
  interrupted call's deadline paused), so nvcc is never killed as a hung kernel;
- keep ``CXX`` as the build step had it (the precompiled-header wrapper): ninja reruns every command whose
  line changed, so a different compiler would rebuild what the build step built (17-25 s per candidate on
  the H200, 2026-12-02); the wrapper's precompiled headers are turned off (KERNELPILOT_PCH=0) so that a
  compile which does run here is the plain compiler, writing nothing outside the build directory;
- add the seconds up for ``take`` (the verdict counts them as build time, phase ``build_in_worker``).

``torch.compile`` in a candidate (a forward compiled on its first call, ``mode="max-autotune"`` benchmarking
its GEMM templates for minutes) compiles inside the worker by design: ``install_dynamo`` registers Dynamo's
compile callbacks, which pause the interrupted call's deadline the same way (the build limit for the compile).
Its seconds are build time when the code compiled is the candidate's (not a problem file's: the harness's
own torch.compile baseline compiles the problem's Model, and that is not the candidate's build).

A library already built (the build step did it, ninja has no work) passes through in milliseconds.
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from kernelpilot.evaluation.build.load_inline import (
    failure_key,
    recorded_failure,
    stable_load_args,
)
from kernelpilot.evaluation.worker import watchdog
from kernelpilot.extension import TORCH_BUILD_FAILURE

_PACKAGE = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # kernelpilot/

_seconds = [0.0]
_compiles: list[str] = []


class InlineBuildError(RuntimeError):
    """A candidate's ``load_inline`` / ``load`` that does not compile, in the worker: our status is build_error,
    and KernelBench's harness, which catches RuntimeError as torch raises it, scores it as KernelBench does."""


def pending() -> bool:
    """Whether something compiled inside the worker since the last ``take``."""
    return bool(_compiles) or _seconds[0] > 0


def record(what: str, seconds: float) -> None:
    """A compile the candidate started elsewhere (cute_hook.py): its seconds are build time too."""
    _seconds[0] += seconds
    _compiles.append(f"{what} {seconds:.1f} s")


def take() -> tuple[float, list[str]]:
    """Seconds spent compiling inside the worker since the last call, and what compiled."""
    seconds, names = _seconds[0], list(_compiles)
    _seconds[0], _compiles[:] = 0.0, []
    return seconds, names


def _wrap(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    def compile_then_load(*args: Any, **kwargs: Any) -> Any:
        # kernelpilot's own build of a directory candidate (extension.build) is left as it is: only what the
        # candidate's code calls gets the build step's stable paths and its remembered compile failures
        candidates_call = not str(sys._getframe(1).f_globals.get("__name__", "")).startswith("kernelpilot.")
        if candidates_call:
            args, kwargs = stable_load_args(kind, args, kwargs)  # the build step's paths: nothing to rebuild
            failed = recorded_failure(failure_key(kind, args, kwargs))
            if failed is not None:  # the build step's compile of these very sources failed: the same error
                raise InlineBuildError(failed)
        name = kwargs.get("name") or (args[0] if args and isinstance(args[0], str) else "?")
        saved = os.environ.get("KERNELPILOT_PCH")
        os.environ["KERNELPILOT_PCH"] = "0"
        started = time.monotonic()
        try:
            with watchdog.compiling(f"{kind}({name!r}), started by the candidate"):
                try:
                    return original(*args, **kwargs)
                except RuntimeError as exc:
                    if candidates_call and TORCH_BUILD_FAILURE in str(exc) and not isinstance(exc, InlineBuildError):
                        raise InlineBuildError(str(exc)) from exc
                    raise
        finally:
            elapsed = time.monotonic() - started
            if elapsed > 0.5:  # a real compile (a cached library loads in milliseconds)
                _seconds[0] += elapsed
                _compiles.append(f"{kind}({name!r}) {elapsed:.1f} s")
            if saved is None:
                os.environ.pop("KERNELPILOT_PCH", None)
            else:
                os.environ["KERNELPILOT_PCH"] = saved

    compile_then_load.kernelpilot_compile_hook = True  # type: ignore[attr-defined]
    compile_then_load.__wrapped__ = original  # type: ignore[attr-defined]
    return compile_then_load


def _compiled_code() -> types.CodeType | None:
    """The code object Dynamo is compiling (a local of its ``compile_inner`` on the stack), if it can be found."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "compile_inner":
            code = frame.f_locals.get("code")
            if isinstance(code, types.CodeType):
                return code
        frame = frame.f_back
    return None


def _started_by_candidate() -> bool:
    """Whether a Dynamo compile is the candidate's: the code compiled is neither kernelpilot's nor a problem
    file's (the torch.compile baseline compiles the problem's Model). Where the code cannot be found: whether
    the first frame outside torch that called into the compile is not kernelpilot's."""
    code = _compiled_code()
    if code is not None:
        where = os.path.realpath(code.co_filename)
        if where.startswith(_PACKAGE):
            return False
        problems = {os.path.realpath(m.__file__) for n, m in list(sys.modules.items())
                    if n.startswith("kernelpilot_problem_") and getattr(m, "__file__", None)}
        return where not in problems
    frame = sys._getframe(1)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if not (module == "torch" or module.startswith(("torch.", "contextlib", "functools"))):
            return not module.startswith("kernelpilot.")
        frame = frame.f_back
    return False


_open_compiles: list[tuple[float, Any, bool]] = []


def _dynamo_started(*args: Any) -> None:
    trigger = getattr(getattr(args[0], "callback_trigger", None), "name", "") if args else ""
    what = "torch.compile" + (f" ({trigger.lower()})" if trigger else "")
    _open_compiles.append((time.monotonic(), watchdog.compile_started(what), _started_by_candidate()))


def _dynamo_ended(*args: Any) -> None:
    if not _open_compiles:
        return
    began, paused, candidates = _open_compiles.pop()
    elapsed = time.monotonic() - began
    if candidates and elapsed > 0.5:
        _seconds[0] += elapsed
        compile_id = getattr(args[0], "compile_id", "") if args else ""
        _compiles.append(f"torch.compile{f' {compile_id}' if compile_id else ''} {elapsed:.1f} s")
    watchdog.compile_ended(paused)


def install_dynamo() -> None:
    """Pause the call deadline while torch.compile compiles in this process (Dynamo's start / end callbacks;
    nested compiles call them once). ``torch._dynamo.reset()`` drops every callback, so this is called again
    before each candidate; a torch without those callbacks is left as it is."""
    try:
        from torch._dynamo import callback_handler
    except ImportError:
        return
    if _dynamo_started not in callback_handler.start_callbacks:
        callback_handler.register_start_callback(_dynamo_started)
    if _dynamo_ended not in callback_handler.end_callbacks:
        callback_handler.register_end_callback(_dynamo_ended)


def install() -> None:
    """Wrap torch.utils.cpp_extension.load_inline and load in this process (the worker, at start)."""
    import torch.utils.cpp_extension as cpp

    for kind in ("load_inline", "load"):
        current = getattr(cpp, kind)
        if not getattr(current, "kernelpilot_compile_hook", False):
            setattr(cpp, kind, _wrap(current, kind))
