"""Candidates that time themselves: found in the source, run with the GPU to themselves.

A forward that chooses its path by timing (CUDA events around two variants and keeping the faster, Triton's
autotuner, ``cudnn.benchmark``, ``torch.compile``'s max-autotune) chooses under the GPU's load of that moment.
A suite verifies candidates under
the GPU lock's *shared* hold (gpu_lock.py), beside the baseline service's torch.compile runs and autotuning,
so such a candidate could take a path there that it would not take on an idle GPU, and our verdict would be
about the load we put beside it, not about the candidate. Seen on the H100 (2026-12-05): CUDA-L1's level1/1
and /17 time an fp32 and an fp16 matmul in their first forward and keep the faster; in our verification they
kept fp32 and passed, in KernelBench's harness run next in the same process they kept fp16 and failed its
tolerance.

So a candidate whose source (its model file and the modules of its own directory that file imports) shows a
self-timing sign runs its untimed calls (verification, the audit) under the lock's *exclusive* hold too, as a
timing does, and its verdict carries a ``self-timing`` warning naming the signs: what it picks can still
differ from run to run (lazy module loading, clocks), which the engineer should know. Nothing here imports
torch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kernelpilot.verdict import Finding

# attribute or imported names that time something, and how the warning names them
_TIMERS: dict[str, str] = {
    "elapsed_time": "CUDA events (elapsed_time)",
    "perf_counter": "time.perf_counter",
    "perf_counter_ns": "time.perf_counter",
    "monotonic": "time.monotonic",
    "monotonic_ns": "time.monotonic",
    "process_time": "time.process_time",
    "do_bench": "triton.testing.do_bench",
    "do_bench_cudagraph": "triton.testing.do_bench",
    "autotune": "Triton's autotuner",
    "Autotuner": "Triton's autotuner",
}
_MAX_FILES = 32  # modules followed from the model file


def _signs_in(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _TIMERS:
            found.append(_TIMERS[node.attr])
        elif isinstance(node, ast.Name) and node.id in _TIMERS:
            found.append(_TIMERS[node.id])
        elif isinstance(node, ast.alias) and node.name in _TIMERS:  # from time import perf_counter as clock
            found.append(_TIMERS[node.name])
        elif isinstance(node, ast.Attribute) and node.attr == "time" and isinstance(node.value, ast.Name) \
                and node.value.id == "time":
            found.append("time.time")
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True \
                and any(isinstance(t, ast.Attribute) and t.attr == "benchmark" and isinstance(t.value, ast.Attribute)
                        and t.value.attr == "cudnn" for t in node.targets):
            found.append("cudnn.benchmark = True")
        elif isinstance(node, ast.keyword) and node.arg == "mode" and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str) and "autotune" in node.value.value:
            found.append(f"torch.compile(mode={node.value.value!r})")
    return found


def _own_imports(tree: ast.AST, directory: Path) -> list[Path]:
    """The modules of ``directory`` that ``tree`` imports (``import kernels``, ``from kernels import f``)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            names += [node.module] if node.module else [a.name for a in node.names]
    out: list[Path] = []
    for name in names:
        head = directory / name.split(".")[0]
        for path in (head.with_suffix(".py"), head / "__init__.py"):
            if path.is_file():
                out.append(path)
    return out


def signs(model_file: Path) -> list[str]:
    """The self-timing signs of a candidate: in its model file and in the modules of its own directory that
    the file imports (followed, up to ``_MAX_FILES`` files); each sign once, in the order found. A file that
    does not parse has none (its import fails and says why)."""
    model_file = Path(model_file)
    directory = model_file.resolve().parent
    todo, seen, found = [model_file.resolve()], set(), []
    while todo and len(seen) < _MAX_FILES:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        found += _signs_in(tree)
        todo += [p.resolve() for p in _own_imports(tree, directory)]
    return list(dict.fromkeys(found))


def finding(found: list[str]) -> Finding:
    names = ", ".join(found)
    return Finding(rule="self-timing", severity="warn", evidence=names, message=(
        f"the candidate times itself ({names}): what it chooses by that timing depends on the GPU's load at the "
        "moment, so its verification and audit ran with the GPU to themselves, as a timing does; it may still "
        "choose otherwise in another run (lazy module loading, clocks): a path chosen by speed must be correct too"))


@contextmanager
def gpu_alone(what: str) -> Iterator[None]:
    """The block with this GPU to itself (the lock's exclusive hold, gpu_lock.py); the wait for it is
    harness time, not the watched call's (its deadline pauses while another process times or compiles)."""
    from kernelpilot.evaluation.timing import gpu_lock
    from kernelpilot.evaluation.worker import watchdog

    with ExitStack() as stack:
        with watchdog.harness_work(f"waiting for the GPU to itself: {what}"):
            stack.enter_context(gpu_lock.current().exclusive())
        yield
