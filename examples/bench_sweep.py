#!/usr/bin/env python3
"""Sweep the examples on one GPU: correctness, then eager / torch.compile / library peers / our kernel.

For softmax, rmsnorm, layernorm and cross_entropy (forward) it runs every N in {4096, 16384, 65536,
131072, 262144}, in bf16 and fp32, with M chosen so the input is 1 GiB; the other examples run at their
problem's default shape. The memory-bound four's kernels take bf16 and fp32. The
peers are Liger and QuACK (peers.py), each through its public function; one that cannot run is listed
with the reason. Every output (ours and the peers') is checked against a float64 run of the problem's
Model before it is timed, elementwise (bf16: |out - ref64| <= 1e-2 + 1e-2 |ref64|; fp32: 1e-4 + 1e-4
|ref64|) and in norm (||out - ref64|| / ||ref64|| <= 1e-2, fp32 1e-5), plus dtype and shape against the
Model itself; a peer must also leave its inputs unchanged. Small ragged shapes are checked too (ours).
Timing: as `kernelpilot eval` times (L2 flush, sync, GPU spin, CUDA events), median.

    python examples/bench_sweep.py                       # everything (about 10 minutes on an H200)
    python examples/bench_sweep.py --only softmax,rmsnorm --ns 4096,65536 --dtypes bf16
    python examples/bench_sweep.py --peers none --no-compile

On the GPU machine the peers travel as wheels: liger-kernel, quack-kernels and its needs
(nvidia-cutlass-dsl with -libs-base, -libs-core and -libs-cu13, apache-tvm-ffi, torch-c-dlpack-ext);
the -libs-cu13 wheel is larger than one call can carry (../shared/gpu/split-carry.sh).

Each example runs in its own child process (a crash there does not end the sweep). The table goes
to stdout and, when $OUT is set, to $OUT/sweep.md (plus sweep.json), and every row is appended to
$OUT/rows.jsonl as soon as it is measured; `python examples/sweep_report.py A/rows.jsonl B/rows.jsonl`
prints the table of one or more such files (a run cut short, or runs split over device calls).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

COPY_TBPS = 4.25  # measured device-to-device copy on our H200 (h200-measured.md)
GEMM_TFLOPS = 790.0  # measured bf16 cuBLAS GEMM at 8192^3 on our H200
SWEEP_NS = (4096, 16384, 65536, 131072, 262144)
DTYPES = ("bf16", "fp32")
DEVICE = "cuda"
MEMORY_BOUND = ("softmax", "rmsnorm", "layernorm", "cross_entropy")
OTHERS = ("residual_rmsnorm_gate", "diag_matmul", "linear_sum_scale", "gemm_bias_gelu")


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


from peers import OURS, PEERS, version  # noqa: E402
from sweep_cases import default_case, edge_cases, load_module, memory_bound_case  # noqa: E402
from sweep_report import Row, fmt, summary  # noqa: E402
from sweep_measure import check, time_ms, to64  # noqa: E402


def reference_models(op: str, init: list[Any], make_inputs: Callable[[], list[Any]], seed: int,
                     dtype: str = "bf16") -> tuple[Any, Any, list[Any]]:
    """The problem's Model, a float64 Model with the same weights, and inputs (GPU). fp32: the Model's
    parameters too."""
    import torch

    problem = load_module(EXAMPLES / op / "problem.py", f"problem_{op}")
    # Build on the GPU under a device context; run and compile outside it (it is a TorchFunctionMode).
    with torch.device(DEVICE):
        torch.manual_seed(seed)
        model = problem.Model(*init).eval()
        if dtype == "fp32":
            model = model.float()
        model64 = problem.Model(*init).double().eval()
        inputs = make_inputs()
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    return model, model64, inputs


def candidate_model(model_file: Path, name: str, init: list[Any], model: Any, dtype: str = "bf16") -> Any:
    """A candidate's ModelNew (from ``model_file``) on the GPU, with ``model``'s weights (and dtype, fp32)."""
    import torch

    with torch.device(DEVICE):
        new = load_module(model_file, name).ModelNew(*init).eval()
    new = new.float() if dtype == "fp32" else new
    new.load_state_dict(model.state_dict())
    return new


def build_models(op: str, init: list[Any], make_inputs: Callable[[], list[Any]], seed: int,
                 dtype: str = "bf16") -> tuple[Any, Any, Any, list[Any]]:
    """The problem's Model, the example candidate's ModelNew with the same weights, a float64 Model, and
    inputs (GPU)."""
    model, model64, inputs = reference_models(op, init, make_inputs, seed, dtype)
    new = candidate_model(EXAMPLES / op / "candidate" / "model_new.py", f"model_new_{op}", init, model, dtype)
    return model, new, model64, inputs


def time_peers(row: Row, op: str, model: Any, inputs: list[Any], ref: Any, ref64: Any, flush: Any,
               peers: list[str]) -> None:
    """Each library's forward: checked on its own copy of the inputs (which it must leave unchanged),
    then timed when correct. Fills row.peer_ms and row.peer_notes."""
    import torch

    from peers import peer

    for name in peers:
        p = peer(name, op, model)
        row.peer_ms[name], row.peer_notes[name] = None, p.note
        if p.fn is None:
            continue
        fn = p.fn
        try:
            mine = [x.clone() for x in inputs]
            ok, norm, _, note = check(fn(*mine), ref, ref64)
            if not all(torch.equal(a, b) for a, b in zip(mine, inputs, strict=True)):
                ok, note = False, "it changed its inputs"
            if not ok:
                row.peer_notes[name] = f"incorrect: {note or f'normalised error {norm:.2e}'}"
                continue
            row.peer_ms[name], _, _ = time_ms(lambda: fn(*mine), flush)
        except Exception as exc:  # noqa: BLE001 - a peer that fails is reported, and the sweep goes on
            row.peer_notes[name] = f"failed: {type(exc).__name__}: {str(exc)[:160]}"
        finally:
            torch.cuda.empty_cache()


def run_case(op: str, shape: str, init: list[Any], make_inputs: Callable[[], list[Any]], work: tuple[str, float],
             flush: Any, use_compile: bool, dtype: str = "bf16", peers: list[str] = ()) -> Row:  # type: ignore[assignment]
    """Build Model and ModelNew, check, time; then the peers. work = ("bytes", n) or ("flops", n)."""
    import torch

    row = Row(op=op, shape=shape, dtype=dtype)
    model, new, model64, inputs = build_models(op, init, make_inputs, 0, dtype)
    with torch.no_grad():
        ref = model(*inputs)
        ref64 = model64(*[to64(x) for x in inputs])
        row.correct, row.norm_err, row.max_abs_err, row.note = check(new(*inputs), ref, ref64)
        row.cand_ms, lo, hi = time_ms(lambda: new(*inputs), flush)
        row.cand_spread = f"{lo:.3f}-{hi:.3f}"
        time_peers(row, op, model, inputs, ref, ref64, flush, list(peers))
        del ref, ref64, model64
        torch.cuda.empty_cache()
        row.eager_ms, _, _ = time_ms(lambda: model(*inputs), flush, max_reps=15)
        if use_compile:
            torch._dynamo.reset()
            compiled = torch.compile(model, dynamic=False)
            row.compile_ms, _, _ = time_ms(lambda: compiled(*inputs), flush)
    kind, amount = work
    if row.cand_ms:
        rate = amount / (row.cand_ms * 1e-3) / 1e12
        if kind == "bytes":
            row.throughput, row.pct_ceiling = f"{rate:.2f} TB/s", 100 * rate / COPY_TBPS
            for name in OURS:  # our other-language kernel's share of the same ceiling, in its note
                if row.peer_ms.get(name):
                    share = 100 * amount / (row.peer_ms[name] * 1e-3) / 1e12 / COPY_TBPS
                    row.peer_notes[name] = f"{share:.0f}% of the copy ceiling"
        else:
            row.throughput, row.pct_ceiling = f"{rate:.0f} TFLOP/s", 100 * rate / GEMM_TFLOPS
        if row.compile_ms:
            row.vs_compile = row.compile_ms / row.cand_ms
        row.vs_eager = row.eager_ms / row.cand_ms
        ran = [ms for name, ms in row.peer_ms.items() if ms and name not in OURS]
        row.vs_peer = min(ran) / row.cand_ms if ran else None
    torch.cuda.empty_cache()
    return row


def check_only(op: str, dtype: str, shape: str, init: list[Any], make_inputs: Callable[[], list[Any]]) -> str | None:
    """None when the candidate matches the Model on these inputs, else what went wrong."""
    import torch

    # diag_matmul and linear_sum_scale are fp32 problems already: no conversion
    model, new, model64, inputs = build_models(op, init, make_inputs, seed=1, dtype="fp32" if op in MEMORY_BOUND
                                               and dtype == "fp32" else "bf16")
    with torch.no_grad():
        ok, norm, _, note = check(new(*inputs), model(*inputs), model64(*[to64(x) for x in inputs]))
    return None if ok else f"{op} {dtype} {shape}: {note or f'normalised error {norm:.2e}'}"


def measure_copy_tbps(flush: Any) -> float:
    """The device-to-device copy ceiling of this card (TB/s): 1 GiB read and written, timed as the kernels are."""
    import torch

    src = torch.empty(1 << 30, dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    ms, _, _ = time_ms(lambda: dst.copy_(src), flush)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * (1 << 30) / (ms * 1e-3) / 1e12


def run_ops(ops: list[str], ns: list[int], use_compile: bool, build_errors: dict[str, str],
            dtypes: list[str] = ["bf16"], peers: list[str] = []) -> tuple[list[Row], list[str]]:  # noqa: B006
    """Check and time every case of `ops` in this process; returns the rows and the edge-shape failures."""
    import torch

    flush = torch.empty(256 << 20, dtype=torch.int8, device=DEVICE)
    global COPY_TBPS
    if os.environ.get("KP_SWEEP_MEASURE_COPY") == "1":  # the ceiling of the card the sweep runs on
        COPY_TBPS = measure_copy_tbps(flush)
        print(f"copy ceiling measured on this card: {COPY_TBPS:.2f} TB/s", flush=True)
    rows: list[Row] = []
    cases = [(op, dt, memory_bound_case(op, n, dt)) for op in ops if op in MEMORY_BOUND for dt in dtypes for n in ns]
    cases += [(op, "default", default_case(op)) for op in ops if op in OTHERS]
    for op, dt, (shape, init, make_inputs, work) in cases:
        if op in build_errors:
            rows.append(Row(op=op, shape=shape, dtype=dt, correct=False, note="build failed"))
            continue
        try:
            if dt == "default":
                row = run_case(op, shape, init, make_inputs, work, flush, use_compile)
            else:
                row = run_case(op, shape, init, make_inputs, work, flush, use_compile, dt, peers)
        except Exception as exc:  # report and go on with the other cases
            row = Row(op=op, shape=shape, dtype=dt, correct=False, note=f"{type(exc).__name__}: {str(exc)[:200]}")
            torch.cuda.empty_cache()
        rows.append(row)
        if os.environ.get("KP_SWEEP_ROWS"):  # every row as it is measured: a run cut short keeps them
            with open(os.environ["KP_SWEEP_ROWS"], "a") as fh:
                fh.write(json.dumps(asdict(row)) + "\n")
        print(f"{op:22s} {dt:5s} {shape:28s} cand {fmt(row.cand_ms, '.3f')} ms  compile {fmt(row.compile_ms, '.3f')} ms  "
              f"{row.throughput}  correct={row.correct} {row.note}", flush=True)

    edge_failures: list[str] = []
    for op, dname, shape, init, make_inputs in edge_cases([o for o in ops if o not in build_errors]):
        if dname not in dtypes and op in MEMORY_BOUND:
            continue
        try:
            failure = check_only(op, dname, shape, init, make_inputs)
        except Exception as exc:  # report and go on
            failure = f"{op} {dname} {shape}: {type(exc).__name__}: {str(exc)[:200]}"
        print(f"edge {op:22s} {dname} {shape:20s} {'FAIL ' + failure if failure else 'ok'}", flush=True)
        if failure:
            edge_failures.append(failure)
    return rows, edge_failures


def run_isolated(op: str, args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """One example in a child process, so a crash (illegal address, sticky CUDA error) stays there."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--only", op, "--ns", args.ns, "--dtypes", args.dtypes,
               "--peers", args.peers, "--child", str(result)]
        if args.no_compile:
            cmd.append("--no-compile")
        env = dict(os.environ)
        if os.environ.get("OUT"):
            Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
            env["KP_SWEEP_ROWS"] = str(Path(os.environ["OUT"]) / "rows.jsonl")
        proc = subprocess.run(cmd, cwd=ROOT, env=env)
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
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="input dtypes of the memory-bound sweep (bf16,fp32)")
    parser.add_argument("--peers", default="liger,quack",
                        help="libraries timed beside our kernel: liger, quack, cute (our CuTe RMSNorm), or none")
    parser.add_argument("--measure-copy", action="store_true",
                        help="measure the copy ceiling on this card (default: the H200's, h200-measured.md)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # internal: run in-process, write JSON here
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("bench_sweep.py needs a CUDA GPU.", file=sys.stderr)
        return 2
    ops = [o for o in (*MEMORY_BOUND, *OTHERS) if not args.only or o in args.only.split(",")]
    ns = [int(n) for n in args.ns.split(",") if n]
    dtypes = [d for d in args.dtypes.split(",") if d]
    peers = [] if args.peers in ("", "none") else args.peers.split(",")
    unknown = [d for d in dtypes if d not in DTYPES] + [n for n in peers if n not in PEERS]
    if unknown:
        print(f"bench_sweep.py: unknown dtype or peer {', '.join(unknown)} (dtypes: {', '.join(DTYPES)}; "
              f"peers: {', '.join(PEERS)} or none)", file=sys.stderr)
        return 2
    os.environ.update(library_env())  # so an in-process rebuild finds cuBLASLt too
    if args.measure_copy:
        os.environ["KP_SWEEP_MEASURE_COPY"] = "1"  # measured in each child, on the card it runs on
    if args.child:
        rows, edge_failures = run_ops(ops, ns, not args.no_compile, {}, dtypes, peers)
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

    text = summary(rows, ops, peers, edge_failures, MEMORY_BOUND)
    text.append(f"total {time.perf_counter() - started:.0f} s")
    report = "\n".join(text)
    wrong = [r for r in rows if r.correct is False]
    print("\n" + report)
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        versions = "".join(f", {n} {version(n) or 'not installed'}" for n in peers)
        header = f"# Example sweep on {torch.cuda.get_device_name()} (torch {torch.__version__}{versions})\n\n"
        (Path(out_dir) / "sweep.md").write_text(header + report + "\n")
        (Path(out_dir) / "sweep.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0 if not wrong and not edge_failures else 1


if __name__ == "__main__":
    sys.exit(main())
