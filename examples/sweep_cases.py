"""The example sweep's cases (bench_sweep.py): the memory-bound four at N rows of 1 GiB, the other
examples at their problem's shape, and the small ragged shapes that are checked but not timed."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLES = Path(__file__).resolve().parent
GIB = 1 << 30

_MODULES: dict[Path, ModuleType] = {}


def load_module(path: Path, name: str) -> ModuleType:
    """Import a file by path, once per process."""
    if path in _MODULES:
        return _MODULES[path]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _MODULES[path] = module
    return module


def memory_bound_case(op: str, n: int, dtype: str = "bf16") -> tuple[str, list[Any], Callable[[], list[Any]], tuple[str, float]]:
    """M rows of N so that the input is 1 GiB; the bytes a kernel must move at least."""
    import torch

    dt, size = (torch.bfloat16, 2) if dtype == "bf16" else (torch.float32, 4)
    m = GIB // (size * n)
    if op == "softmax":
        return f"{m}x{n}", [], lambda: [torch.randn(m, n, dtype=dt)], ("bytes", 2.0 * size * m * n)
    if op == "rmsnorm":
        return f"{m}x{n}", [n], lambda: [torch.randn(m, n, dtype=dt)], ("bytes", 2.0 * size * m * n + size * n)
    if op == "layernorm":
        return f"{m}x{n}", [n], lambda: [torch.randn(m, n, dtype=dt)], ("bytes", 2.0 * size * m * n + 2 * size * n)
    if op == "cross_entropy":
        return (f"{m}x{n}", [], lambda: [torch.randn(m, n, dtype=dt), torch.randint(0, n, (m,))],
                ("bytes", 1.0 * size * m * n + 8 * m))
    raise ValueError(op)


def default_case(op: str) -> tuple[str, list[Any], Callable[[], list[Any]], tuple[str, float]]:
    p = load_module(EXAMPLES / op / "problem.py", f"problem_{op}")
    init = p.get_init_inputs()
    if op == "residual_rmsnorm_gate":
        m, n = p.tokens, p.hidden_size
        return f"{m}x{n}", init, p.get_inputs, ("bytes", 10.0 * m * n + 2 * n)
    if op == "diag_matmul":
        return f"{p.N}x{p.M}", init, p.get_inputs, ("bytes", 8.0 * p.N * p.M + 4 * p.N)
    if op == "linear_sum_scale":
        b, i, o = p.batch_size, p.in_features, p.out_features
        return f"{b}x{i}, W {o}x{i}", init, p.get_inputs, ("bytes", 4.0 * (b * i + o * i + b))
    if op == "gemm_bias_gelu":
        m, k, n = p.tokens, p.hidden_size, p.intermediate_size
        return f"{m}x{k} @ {k}x{n}", init, p.get_inputs, ("flops", 2.0 * m * n * k)
    raise ValueError(op)


# Small ragged shapes, checked but not timed: rows whose last vectors, CTAs or cluster ranks are
# partly or wholly empty, the smallest and largest supported N, ignored targets. fp32 rows hold half
# as many elements per vector and per row (at most 262144).
EDGE_SHAPES = {"bf16": ((37, 12344), (16, 100008), (5, 8), (3, 24), (2, 524288), (9, 200016)),
               "fp32": ((37, 12344), (16, 100004), (5, 4), (3, 12), (2, 262144), (9, 200012))}


def edge_cases(ops: list[str]) -> list[tuple[str, str, str, list[Any], Callable[[], list[Any]]]]:
    import torch

    cases: list[tuple[str, str, str, list[Any], Callable[[], list[Any]]]] = []
    for dname, shapes in EDGE_SHAPES.items():
        dt = torch.bfloat16 if dname == "bf16" else torch.float32
        for m, n in shapes:
            shape = f"{m}x{n}"
            if "softmax" in ops:
                cases.append(("softmax", dname, shape, [], lambda m=m, n=n, dt=dt: [torch.randn(m, n, dtype=dt) * 3]))
            if "rmsnorm" in ops:
                cases.append(("rmsnorm", dname, shape, [n], lambda m=m, n=n, dt=dt: [torch.randn(m, n, dtype=dt)]))
            if "layernorm" in ops:
                cases.append(("layernorm", dname, shape, [n], lambda m=m, n=n, dt=dt: [torch.randn(m, n, dtype=dt) + 5]))
            if "cross_entropy" in ops:
                cases.append(("cross_entropy", dname, shape, [], lambda m=m, n=n, dt=dt: [
                    torch.randn(m, n, dtype=dt) * 4,
                    torch.where(torch.rand(m) < 0.2, -100, torch.randint(0, n, (m,)))]))
            if "residual_rmsnorm_gate" in ops and dname == "bf16" and n <= 262144 and n % 8 == 0:
                cases.append(("residual_rmsnorm_gate", dname, shape, [n],
                              lambda m=m, n=n, dt=dt: [torch.randn(m, n, dtype=dt) for _ in range(3)]))
    if "diag_matmul" in ops:
        cases.append(("diag_matmul", "fp32", "1000x1234", [], lambda: [torch.randn(1000), torch.randn(1000, 1234)]))
    if "linear_sum_scale" in ops:
        cases.append(("linear_sum_scale", "fp32", "17x4096, W 333x4096", [4096, 333, 0.7],
                      lambda: [torch.randn(17, 4096)]))
    return cases
