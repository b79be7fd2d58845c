#!/usr/bin/env python3
"""Sweep the examples on one GPU: correctness, then eager / torch.compile / reference candidate times.

For softmax, rmsnorm, layernorm and cross_entropy it runs every N in {4096, 16384, 65536, 262144}
with M chosen so the input is 1 GiB of bf16; the other examples run at their problem's default
shape. Each row is checked against a float64 run of the problem's Model, elementwise (bf16:
|out - ref64| <= 1e-2 + 1e-2 |ref64|; fp32: 1e-4 + 1e-4 |ref64|) and in norm (||out - ref64|| /
||ref64|| <= 1e-2, fp32 1e-5), plus dtype and shape against the Model itself; small ragged shapes
are checked too. Timing: as `kernelpilot eval` times (L2 flush, sync, GPU spin, CUDA events), median.

    python examples/bench_sweep.py                       # everything (a few minutes on an H200)
    python examples/bench_sweep.py --only softmax,rmsnorm --ns 4096,65536
    python examples/bench_sweep.py --no-compile          # skip the torch.compile baseline

Each example runs in its own child process (a crash there does not end the sweep). The table goes
to stdout and, when $OUT is set, to $OUT/sweep.md (plus sweep.json).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

COPY_TBPS = 4.25  # measured device-to-device copy on our H200 (h200-measured.md)
GEMM_TFLOPS = 790.0  # measured bf16 cuBLAS GEMM at 8192^3 on our H200
SWEEP_NS = (4096, 16384, 65536, 262144)
GIB = 1 << 30
DEVICE = "cuda"
MEMORY_BOUND = ("softmax", "rmsnorm", "layernorm", "cross_entropy")
OTHERS = ("residual_rmsnorm_gate", "diag_matmul", "linear_sum_scale", "gemm_bias_gelu")


@dataclass
class Row:
    op: str
    shape: str
    eager_ms: float | None = None
    compile_ms: float | None = None
    cand_ms: float | None = None
    cand_spread: str = ""
    throughput: str = ""  # "3.91 TB/s" or "712 TFLOP/s"
    pct_ceiling: float | None = None
    vs_compile: float | None = None
    vs_eager: float | None = None
    correct: bool | None = None
    norm_err: float | None = None
    max_abs_err: float | None = None
    note: str = ""


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


def library_env() -> dict[str, str]:
    """The build environment kernelpilot uses (CUDA_HOME, arch, and the pip wheels' cuBLASLt when
    the toolkit lacks it, for gemm_bias_gelu)."""
    from kernelpilot.toolkit import toolchain_env

    return {**os.environ, **toolchain_env()}


def prebuild(ops: list[str]) -> dict[str, str]:
    """Build every candidate extension in parallel subprocesses; returns op -> error for failures."""
    errors: dict[str, str] = {}
    env = library_env()

    def build(op: str) -> tuple[str, str | None]:
        cmd = [sys.executable, "-m", "kernelpilot.extension", "--build", str(EXAMPLES / op / "candidate"), "--quiet"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode == 0:
            return op, None
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        return op, "\n".join(tail)

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(ops)) as pool:
        for op, err in pool.map(build, ops):
            if err is not None:
                errors[op] = err
    return errors


def time_ms(fn: Callable[[], Any], flush: Any, max_reps: int = 30, budget_ms: float = 300.0) -> tuple[float, float, float]:
    """Median, min and max of single calls, timed the way `kernelpilot eval` times them.

    Per call: L2 flush, full device sync, a GPU spin long enough to cover the host's work for the
    call, then start event, call, end event. The events see GPU execution only, not launch overhead.
    """
    import torch

    from kernelpilot.evaluation.timing import times_behind_spin

    fn()  # warm-up (compilation, autotuning, handle creation)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    estimate_ms = max((time.perf_counter() - t0) * 1e3, 1e-3)
    times = times_behind_spin(fn, int(max(5, min(max_reps, budget_ms / estimate_ms))), flush=flush)
    return times[len(times) // 2], times[0], times[-1]


def as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check(outs: Any, refs: Any, refs64: Any) -> tuple[bool, float, float, str]:
    """Elementwise tolerance and normalised error against the float64 Model; max |out - Model|."""
    import torch

    ok, worst_norm, worst_abs, notes = True, 0.0, 0.0, []
    for i, (o, r, r64) in enumerate(zip(as_list(outs), as_list(refs), as_list(refs64), strict=True)):
        if o.shape != r.shape or o.dtype != r.dtype:
            return False, math.inf, math.inf, f"output {i}: {o.dtype}{list(o.shape)} vs {r.dtype}{list(r.shape)}"
        tol = 1e-2 if r.dtype in (torch.bfloat16, torch.float16) else 1e-4
        max_norm = 1e-2 if r.dtype in (torch.bfloat16, torch.float16) else 1e-5
        of, rf, r64f = o.double(), r.double(), r64.double()
        if not torch.isfinite(of).all():
            return False, math.inf, math.inf, f"output {i} has NaN/inf"
        # Elementwise against the float64 run: a reordered sum (linear_sum_scale) legitimately differs
        # from the fp32 Model by more than atol where the result cancels to near zero.
        bad = ((of - r64f).abs() > tol + tol * r64f.abs()).sum().item()
        norm = ((of - r64f).norm() / r64f.norm().clamp_min(1e-30)).item()
        worst_norm, worst_abs = max(worst_norm, norm), max(worst_abs, (of - rf).abs().max().item())
        if bad or norm > max_norm:
            ok = False
            notes.append(f"output {i}: {bad} elements out of tolerance, normalised error {norm:.2e}")
    return ok, worst_norm, worst_abs, "; ".join(notes)


def to64(x: Any) -> Any:
    import torch

    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def build_models(op: str, init: list[Any], make_inputs: Callable[[], list[Any]], seed: int) -> tuple[Any, Any, Any, list[Any]]:
    """The problem's Model, the candidate's ModelNew with the same weights, a float64 Model, and inputs (GPU)."""
    import torch

    problem = load_module(EXAMPLES / op / "problem.py", f"problem_{op}")
    cand = load_module(EXAMPLES / op / "candidate" / "model_new.py", f"model_new_{op}")
    # Build on the GPU under a device context; run and compile outside it (it is a TorchFunctionMode).
    with torch.device(DEVICE):
        torch.manual_seed(seed)
        model = problem.Model(*init).eval()
        new = cand.ModelNew(*init).eval()
        model64 = problem.Model(*init).double().eval()
        inputs = make_inputs()
    new.load_state_dict(model.state_dict())
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    return model, new, model64, inputs


def run_case(op: str, shape: str, init: list[Any], make_inputs: Callable[[], list[Any]], work: tuple[str, float],
             flush: Any, use_compile: bool) -> Row:
    """Build Model and ModelNew, check, time. work = ("bytes", n) or ("flops", n)."""
    import torch

    row = Row(op=op, shape=shape)
    model, new, model64, inputs = build_models(op, init, make_inputs, seed=0)
    with torch.no_grad():
        out, ref = new(*inputs), model(*inputs)
        ref64 = model64(*[to64(x) for x in inputs])
        row.correct, row.norm_err, row.max_abs_err, row.note = check(out, ref, ref64)
        del out, ref, ref64, model64
        torch.cuda.empty_cache()

        row.cand_ms, lo, hi = time_ms(lambda: new(*inputs), flush)
        row.cand_spread = f"{lo:.3f}-{hi:.3f}"
        row.eager_ms, _, _ = time_ms(lambda: model(*inputs), flush, max_reps=15)
        if use_compile:
            torch._dynamo.reset()
            compiled = torch.compile(model, dynamic=False)
            row.compile_ms, _, _ = time_ms(lambda: compiled(*inputs), flush)
    kind, amount = work
    if kind == "bytes":
        tbps = amount / (row.cand_ms * 1e-3) / 1e12
        row.throughput, row.pct_ceiling = f"{tbps:.2f} TB/s", 100 * tbps / COPY_TBPS
    else:
        tflops = amount / (row.cand_ms * 1e-3) / 1e12
        row.throughput, row.pct_ceiling = f"{tflops:.0f} TFLOP/s", 100 * tflops / GEMM_TFLOPS
    if row.compile_ms:
        row.vs_compile = row.compile_ms / row.cand_ms
    row.vs_eager = row.eager_ms / row.cand_ms
    del inputs
    torch.cuda.empty_cache()
    return row


def memory_bound_case(op: str, n: int) -> tuple[str, list[Any], Callable[[], list[Any]], tuple[str, float]]:
    import torch

    m = GIB // (2 * n)
    bf16 = torch.bfloat16
    if op == "softmax":
        return f"{m}x{n}", [], lambda: [torch.randn(m, n, dtype=bf16)], ("bytes", 4.0 * m * n)
    if op == "rmsnorm":
        return f"{m}x{n}", [n], lambda: [torch.randn(m, n, dtype=bf16)], ("bytes", 4.0 * m * n + 2 * n)
    if op == "layernorm":
        return f"{m}x{n}", [n], lambda: [torch.randn(m, n, dtype=bf16)], ("bytes", 4.0 * m * n + 4 * n)
    if op == "cross_entropy":
        return (f"{m}x{n}", [], lambda: [torch.randn(m, n, dtype=bf16), torch.randint(0, n, (m,))],
                ("bytes", 2.0 * m * n + 8 * m))
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
# partly or wholly empty, the smallest and largest supported N, ignored targets.
EDGE_SHAPES = ((37, 12344), (16, 100008), (5, 8), (3, 24), (2, 524288), (9, 200016))


def edge_cases(ops: list[str]) -> list[tuple[str, str, list[Any], Callable[[], list[Any]]]]:
    import torch

    bf16 = torch.bfloat16
    cases: list[tuple[str, str, list[Any], Callable[[], list[Any]]]] = []
    for m, n in EDGE_SHAPES:
        shape = f"{m}x{n}"
        if "softmax" in ops:
            cases.append(("softmax", shape, [], lambda m=m, n=n: [torch.randn(m, n, dtype=bf16) * 3]))
        if "rmsnorm" in ops:
            cases.append(("rmsnorm", shape, [n], lambda m=m, n=n: [torch.randn(m, n, dtype=bf16)]))
        if "layernorm" in ops:
            cases.append(("layernorm", shape, [n], lambda m=m, n=n: [torch.randn(m, n, dtype=bf16) + 5]))
        if "cross_entropy" in ops:
            cases.append(("cross_entropy", shape, [], lambda m=m, n=n: [
                torch.randn(m, n, dtype=bf16) * 4,
                torch.where(torch.rand(m) < 0.2, -100, torch.randint(0, n, (m,)))]))
        if "residual_rmsnorm_gate" in ops and n <= 262144:
            cases.append(("residual_rmsnorm_gate", shape, [n],
                          lambda m=m, n=n: [torch.randn(m, n, dtype=bf16) for _ in range(3)]))
    if "diag_matmul" in ops:
        cases.append(("diag_matmul", "1000x1234", [], lambda: [torch.randn(1000), torch.randn(1000, 1234)]))
    if "linear_sum_scale" in ops:
        cases.append(("linear_sum_scale", "17x4096, W 333x4096", [4096, 333, 0.7], lambda: [torch.randn(17, 4096)]))
    return cases


def check_only(op: str, shape: str, init: list[Any], make_inputs: Callable[[], list[Any]]) -> str | None:
    """None when the candidate matches the Model on these inputs, else what went wrong."""
    import torch

    model, new, model64, inputs = build_models(op, init, make_inputs, seed=1)
    with torch.no_grad():
        ok, norm, _, note = check(new(*inputs), model(*inputs), model64(*[to64(x) for x in inputs]))
    return None if ok else f"{op} {shape}: {note or f'normalised error {norm:.2e}'}"


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[Row]) -> str:
    head = ("| op | shape | eager ms | compile ms | candidate ms (min-max) | achieved | % of ceiling | x vs compile "
            "| x vs eager | correct | norm err | note |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r.op} | {r.shape} | {fmt(r.eager_ms, '.3f')} | {fmt(r.compile_ms, '.3f')} | "
            f"{fmt(r.cand_ms, '.3f')} ({r.cand_spread or '-'}) | {r.throughput or '-'} | {fmt(r.pct_ceiling, '.0f')} | "
            f"{fmt(r.vs_compile, '.2f')} | {fmt(r.vs_eager, '.2f')} | "
            f"{'yes' if r.correct else 'NO' if r.correct is not None else '-'} | {fmt(r.norm_err, '.1e')} | {r.note} |"
        )
    return "\n".join(lines)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def run_ops(ops: list[str], ns: list[int], use_compile: bool, build_errors: dict[str, str]) -> tuple[list[Row], list[str]]:
    """Check and time every case of `ops` in this process; returns the rows and the edge-shape failures."""
    import torch

    flush = torch.empty(256 << 20, dtype=torch.int8, device=DEVICE)
    rows: list[Row] = []
    cases = [(op, memory_bound_case(op, n)) for op in ops if op in MEMORY_BOUND for n in ns]
    cases += [(op, default_case(op)) for op in ops if op in OTHERS]
    for op, (shape, init, make_inputs, work) in cases:
        if op in build_errors:
            rows.append(Row(op=op, shape=shape, note="build failed"))
            continue
        try:
            row = run_case(op, shape, init, make_inputs, work, flush, use_compile)
        except Exception as exc:  # report and go on with the other cases
            row = Row(op=op, shape=shape, correct=False, note=f"{type(exc).__name__}: {str(exc)[:200]}")
            torch.cuda.empty_cache()
        rows.append(row)
        print(f"{op:22s} {shape:28s} cand {fmt(row.cand_ms, '.3f')} ms  compile {fmt(row.compile_ms, '.3f')} ms  "
              f"{row.throughput}  correct={row.correct} {row.note}", flush=True)

    edge_failures: list[str] = []
    for op, shape, init, make_inputs in edge_cases([o for o in ops if o not in build_errors]):
        try:
            failure = check_only(op, shape, init, make_inputs)
        except Exception as exc:  # report and go on
            failure = f"{op} {shape}: {type(exc).__name__}: {str(exc)[:200]}"
        print(f"edge {op:22s} {shape:20s} {'FAIL ' + failure if failure else 'ok'}", flush=True)
        if failure:
            edge_failures.append(failure)
    return rows, edge_failures


def run_isolated(op: str, args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """One example in a child process, so a crash (illegal address, sticky CUDA error) stays there."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--only", op, "--ns", args.ns, "--child", str(result)]
        if args.no_compile:
            cmd.append("--no-compile")
        proc = subprocess.run(cmd, cwd=ROOT)
        if proc.returncode != 0 or not result.is_file():
            return [Row(op=op, shape="-", correct=False, note=f"child process exited with {proc.returncode}")], [
                f"{op}: child process exited with {proc.returncode}"]
        data = json.loads(result.read_text())
        return [Row(**r) for r in data["rows"]], list(data["edge_failures"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated example names (default: all)")
    parser.add_argument("--ns", default=",".join(map(str, SWEEP_NS)), help="row lengths for the memory-bound sweep")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # internal: run in-process, write JSON here
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("bench_sweep.py needs a CUDA GPU.", file=sys.stderr)
        return 2
    ops = [o for o in (*MEMORY_BOUND, *OTHERS) if not args.only or o in args.only.split(",")]
    ns = [int(n) for n in args.ns.split(",") if n]
    os.environ.update(library_env())  # so an in-process rebuild finds cuBLASLt too
    if args.child:
        rows, edge_failures = run_ops(ops, ns, not args.no_compile, {})
        Path(args.child).write_text(json.dumps({"rows": [asdict(r) for r in rows], "edge_failures": edge_failures}))
        return 0

    started = time.perf_counter()
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | building {len(ops)} candidates ...", flush=True)
    build_errors = prebuild(ops)
    for op, err in build_errors.items():
        print(f"--- build of {op} failed:\n{err}", flush=True)
    print(f"builds done in {time.perf_counter() - started:.0f} s", flush=True)
    rows, edge_failures = [], []
    for op in ops:
        if op in build_errors:
            rows.append(Row(op=op, shape="-", correct=False, note="build failed"))
            continue
        op_rows, op_failures = run_isolated(op, args)
        rows += op_rows
        edge_failures += op_failures

    text = [table(rows), ""]
    text.append(f"edge shapes failed: {len(edge_failures)}" + "".join(f"\n  {f}" for f in edge_failures))
    mb = [r.vs_compile for r in rows if r.op in MEMORY_BOUND and r.vs_compile]
    text.append(f"geomean x vs torch.compile over the memory-bound sweep ({len(mb)} cases): {fmt(geomean(mb), '.2f')}")
    for op in ops:
        per_op = geomean([r.vs_compile for r in rows if r.op == op and r.vs_compile])
        pct = [r.pct_ceiling for r in rows if r.op == op and r.pct_ceiling is not None]
        if per_op or pct:
            text.append(f"  {op}: geomean x vs compile {fmt(per_op, '.2f')}, "
                        f"% of ceiling min {fmt(min(pct) if pct else None, '.0f')}%")
    wrong = [f"{r.op} {r.shape}" for r in rows if not r.correct]
    text.append(f"incorrect or failed: {', '.join(wrong) if wrong else 'none'}")
    text.append(f"total {time.perf_counter() - started:.0f} s")
    report = "\n".join(text)
    print("\n" + report)
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        header = f"# Example sweep on {torch.cuda.get_device_name()} (torch {torch.__version__})\n\n"
        (Path(out_dir) / "sweep.md").write_text(header + report + "\n")
        (Path(out_dir) / "sweep.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0 if not wrong and not edge_failures else 1


if __name__ == "__main__":
    sys.exit(main())
