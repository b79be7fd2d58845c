"""Tools that go through the evaluation engine: build, test, benchmark, profile, propose, revert,
plus show_problem, inductor_kernel (the torch.compile baseline's own Triton code) and inductor (that
code converted into a runnable Triton candidate, benchmarked)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernelpilot.agent import fileops
from kernelpilot.agent.candidates import CandidateRecord
from kernelpilot.agent.events import CandidateEvaluated
from kernelpilot.agent.prompts import cached_ceilings, gpu_facts
from kernelpilot.agent.toolbase import ToolContext, ToolFailure, ToolResult
from kernelpilot.agent.verdict_text import build_for_model, verdict_for_model
from kernelpilot.inductor.c0 import candidate_from_recording
from kernelpilot.inductor.generate import record as record_compile
from kernelpilot.inductor.helpers import ConversionError
from kernelpilot.problem import analyse
from kernelpilot.profiling import profile_candidate
from kernelpilot.profiling.roofline import roofline_from_verdict
from kernelpilot.profiling.sanitizer import gate_available, run_sanitizer
from kernelpilot.verdict import Verdict


async def evaluate(ctx: ToolContext, mode: str) -> Verdict:
    """Run the engine on the current candidate directory (``evaluate_async`` when offered)."""
    if not ctx.candidate_dir.is_dir():
        raise ToolFailure("there is no candidate yet: write binding.cpp, kernel.cu and model_new.py in "
                          f"{ctx.candidate_rel}/ first")
    ev = ctx.evaluator
    if hasattr(ev, "evaluate_async"):
        result = await ev.evaluate_async(ctx.problem, ctx.candidate_dir, mode=mode)
    else:
        result = await asyncio.to_thread(ev.evaluate, ctx.problem, ctx.candidate_dir, mode=mode)
    if isinstance(result, dict):
        result = Verdict.from_dict(result)
    return result


async def build(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    verdict = await evaluate(ctx, "build")
    return ToolResult(build_for_model(verdict), ok=bool(verdict.build and verdict.build.ok))


async def test(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    verdict = await evaluate(ctx, "test")
    return ToolResult(verdict_for_model(verdict), ok=verdict.status == "ok")


async def benchmark(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    files_hash = fileops.tree_hash(ctx.candidate_dir)
    verdict = await evaluate(ctx, "benchmark")
    cid = ctx.book.next_id()
    note = ""
    commit = diff = ""
    try:
        commit = str(ctx.workspace.checkpoint(cid, f"{verdict.status}: {verdict.summary}".strip(" :"), verdict))
        diff = str(ctx.workspace.diff(cid))
    except Exception as exc:  # noqa: BLE001 - the verdict still counts; say what failed
        note = f"\n(note: checkpoint failed: {exc})"
    data = verdict.to_dict()
    record = CandidateRecord(id=cid, verdict=data, commit=commit, files_hash=files_hash, diff=diff)
    ctx.book.add(record)
    best = ctx.book.best()
    best_line = f"\nbest so far: {best.id} ({best.median_ms:.4g} ms)" if best and best.median_ms else ""
    event = CandidateEvaluated(candidate_id=cid, verdict=data, diff=diff, commit=commit, source="agent")
    text = (f"candidate {cid}" + (f" (checkpoint {commit[:10]})" if commit else "") + "\n" + verdict_for_model(verdict)
            + best_line + note)
    return ToolResult(text, ok=verdict.status == "ok", events=[event])


async def profile(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    if not await asyncio.to_thread(_gpu_visible):
        why = "profiling needs a GPU and none is visible"
    else:
        record = ctx.book.for_hash(fileops.tree_hash(ctx.candidate_dir))
        roofline = roofline_from_verdict(record.verdict) if record is not None else None
        kwargs = {"roofline": roofline} if roofline is not None else {}
        result = await asyncio.to_thread(profile_candidate, Path(ctx.problem.path), ctx.candidate_dir, **kwargs)
        error = "" if isinstance(result, str) else str(getattr(result, "error", "") or "")
        if not error:
            text = result if isinstance(result, str) else _profile_text(result)
            return ToolResult("source: kernelpilot.profiling (Nsight Compute when available)\n" + text)
        why = f"the profiler failed: {error}"
    record = ctx.book.for_hash(fileops.tree_hash(ctx.candidate_dir))
    if record is None:
        verdict = await evaluate(ctx, "benchmark")
        data = verdict.to_dict()
    else:
        data = record.verdict
    return ToolResult(
        f"source: the benchmark verdict's timings and roofline ({why})\n" + verdict_for_model(Verdict.from_dict(data)),
        ok=data.get("status") == "ok",
    )


async def sanitize(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """compute-sanitizer memcheck (+ racecheck with shared memory) on a shrunken input."""
    if not await asyncio.to_thread(gate_available):
        return ToolResult("the sanitizer needs compute-sanitizer and a GPU; neither check ran here", ok=False)
    report = await asyncio.to_thread(run_sanitizer, Path(ctx.problem.path), ctx.candidate_dir)
    return ToolResult(report.text(), ok=report.passed)


def _gpu_visible() -> bool:
    return gpu_facts().available


def _profile_text(result: Any) -> str:
    for attr in ("text", "for_model", "to_text", "summary"):
        value = getattr(result, attr, None)
        if callable(value):
            return str(value())
        if isinstance(value, str):
            return value
    return str(result)


async def show_problem(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    info = await problem_info(ctx)
    return ToolResult(f"problem {ctx.problem.name} "
                      f"({ctx.problem.path})\n```python\n{ctx.problem.source.rstrip()}\n```\n{info}")


async def problem_info(ctx: ToolContext) -> str:
    if "problem_info" not in ctx.cache:
        ctx.cache["problem_info"] = await asyncio.to_thread(describe_problem, ctx.problem)
    return str(ctx.cache["problem_info"])


def describe_problem(problem: Any) -> str:
    """Shapes, dtypes, bytes moved, FLOPs (kernelpilot.problem.analyse, on the meta device)."""
    try:
        info = analyse(problem)
    except Exception as exc:  # noqa: BLE001 - the prompt still works without it
        return f"analysis unavailable: {exc}"
    lines = ["inputs:"]
    lines += [f"  {tuple(t.shape)} {t.dtype} ({t.nbytes} B)" for t in info.inputs]
    if info.other_inputs:
        lines.append(f"  non-tensor arguments: {', '.join(info.other_inputs)}")
    lines.append("outputs:")
    lines += [f"  {tuple(t.shape)} {t.dtype} ({t.nbytes} B)" for t in info.outputs]
    if info.init_inputs:
        lines.append(f"constructor arguments: {', '.join(info.init_inputs)}")
    lines.append(f"parameters: {info.parameter_count} ({info.parameter_bytes} B)")
    lines.append(f"minimum bytes moved: {info.bytes_moved} ({info.bytes_moved / 1e6:.3f} MB)")
    lines.append(f"FLOPs: {info.flops if info.flops is not None else 'not counted (no matmul/conv-class op)'}")
    ai = getattr(info, "arithmetic_intensity", None)
    if isinstance(ai, (int, float)):
        lines.append(f"arithmetic intensity: {ai:.3g} FLOP/byte")
    lines.append(_floor_line(info))
    return "\n".join(lines)


def _floor_line(info: Any) -> str:
    """The speed-of-light floor at the GPU's measured ceilings, when the engine has cached them."""
    ceil = cached_ceilings()
    if ceil is None:
        return "speed-of-light floor: known after the first benchmark (it needs this GPU's measured ceilings)"
    try:
        from kernelpilot.evaluation.timing.speed_of_light import roofline

        # torch's defaults: cuDNN convolutions in TF32, matmuls not (as the engine's worker runs the reference)
        rate, _ = ceil.compute_rate(info.primary_dtype, info.flops_by_op, conv_tf32=True, matmul_tf32=False)
        floor_ms, bound = roofline(info.bytes_moved, info.flops, ceil.copy_tbps, rate)
    except Exception as exc:  # noqa: BLE001
        return f"speed-of-light floor: unavailable ({exc})"
    if floor_ms is None:
        return "speed-of-light floor: unknown"
    return f"speed-of-light floor: {floor_ms:.4g} ms, {bound}-bound ({ceil.source()})"


INDUCTOR_SCRIPT = r"""
import importlib.util, sys
path, mode = sys.argv[1], sys.argv[2]
import torch
if not torch.cuda.is_available():
    print("UNAVAILABLE: no CUDA GPU is visible, so torch.compile cannot generate its Triton kernels here")
    sys.exit(3)
spec = importlib.util.spec_from_file_location("kp_problem", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
from torch._inductor.utils import run_and_get_code
model = mod.Model(*mod.get_init_inputs()).cuda().eval()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
compiled = torch.compile(model, mode=None if mode == "default" else mode)
with torch.no_grad():
    _, codes = run_and_get_code(compiled, *inputs)
print("\n\n# ===== next generated module =====\n\n".join(codes))
"""


def inductor_code(problem_path: Path, compile_mode: str = "default", timeout_s: float = 600) -> tuple[bool, str]:
    """(available, text): the Triton/Python code Inductor generates for the problem, in a subprocess."""
    env = dict(os.environ)
    env.pop("TORCH_LOGS", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", INDUCTOR_SCRIPT, str(problem_path), compile_mode],
            capture_output=True, text=True, timeout=timeout_s, env=env, start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return False, f"torch.compile did not finish within {timeout_s:.0f} s"
    if proc.returncode == 3 or proc.stdout.startswith("UNAVAILABLE"):
        return False, proc.stdout.strip().removeprefix("UNAVAILABLE: ")
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        return False, f"torch.compile failed (exit {proc.returncode}):\n{tail}"
    return True, proc.stdout


async def inductor_kernel(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    if "inductor" not in ctx.cache:
        mode = str(getattr(ctx.config, "compile_mode", "default") or "default")
        ctx.cache["inductor"] = await asyncio.to_thread(inductor_code, Path(ctx.problem.path), mode)
    available, text = ctx.cache["inductor"]
    if not available:
        return ToolResult(f"inductor_kernel unavailable: {text}", ok=False)
    offset = max(0, int(args.get("offset") or 0))
    size = max(1000, min(int(args.get("max_chars") or 12000), 40000))
    part = text[offset : offset + size]
    more = (f"\n… {len(text) - offset - len(part)} more chars: call inductor_kernel with offset={offset + len(part)}"
            if offset + len(part) < len(text) else "")
    return ToolResult(f"torch.compile (Inductor) generated code, chars {offset}-{offset + len(part)} of "
                      f"{len(text)}:\n{part}{more}")


def write_inductor_candidate(problem: Path, candidate_dir: Path, guard: Any, compile_mode: str = "default") -> Any:
    """Record torch.compile's output on the GPU, convert it, and replace the candidate's files with it."""
    rec = record_compile(problem, compile_mode)
    conversion = candidate_from_recording(problem, rec.data)  # one graph, several, or none (eager)
    root = candidate_dir
    for old in sorted(root.rglob("*")) if root.is_dir() else []:
        if old.is_file() and "__pycache__" not in old.parts and old.name not in conversion.files:
            Path(guard(str(old))).unlink()
    for name, text in conversion.files.items():
        fileops.atomic_write(Path(guard(str(root / name))), text)
    return conversion


async def inductor(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    mode = str(getattr(ctx.config, "compile_mode", "default") or "default")

    def guard(path: str) -> Any:
        return ctx.workspace.guard(str(Path(path).resolve().relative_to(ctx.root.resolve())))

    try:
        conversion = await asyncio.to_thread(write_inductor_candidate, Path(ctx.problem.path), ctx.candidate_dir,
                                             guard, mode)
    except ConversionError as exc:
        return ToolResult(f"inductor unavailable: {exc}", ok=False)
    libs = f"; library calls kept: {', '.join(conversion.libraries)}" if conversion.libraries else ""
    head = (f"wrote torch.compile's kernels as a Triton candidate in {ctx.candidate_rel}/ "
            f"({', '.join(sorted(conversion.files))}; kernels: {', '.join(conversion.kernels)}; launch configs: "
            f"{conversion.configs}{libs})\n")
    result = await benchmark(ctx, {})
    return ToolResult(head + result.text, ok=result.ok, events=result.events)


async def propose(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    summary = str(args.get("summary") or "").strip()
    if not summary:
        raise ToolFailure("give a summary: what changed and why it is faster")
    record = ctx.book.for_hash(fileops.tree_hash(ctx.candidate_dir))
    if record is None:
        raise ToolFailure("the current candidate files have not been benchmarked; call benchmark first, then propose")
    if not record.ok:
        raise ToolFailure(f"candidate {record.id} did not pass (status {record.verdict.get('status')}); only a "
                          "candidate with status ok can be proposed")
    if not await asyncio.to_thread(ctx.workspace.changed_files, record.id):
        raise ToolFailure(f"candidate {record.id} is identical to the files at the session start (the engineer's "
                          "repository already has them), so there is nothing to propose; change the kernel, or finish")
    return ToolResult(f"proposed {record.id}", proposal=record.id, summary=summary)


async def revert(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    cid = str(args.get("candidate_id") or "").strip()
    record = ctx.book.get(cid)
    if record is None:
        known = ", ".join(ctx.book.records) or "none yet"
        raise ToolFailure(f"unknown candidate {cid!r}; known candidates: {known}")
    await asyncio.to_thread(ctx.workspace.restore, cid)
    matches = fileops.tree_hash(ctx.candidate_dir) == record.files_hash
    status = record.verdict.get("status")
    ms = f", {record.median_ms:.4g} ms" if record.median_ms else ""
    return ToolResult(f"restored the files of {cid} (status {status}{ms})"
                      + ("" if matches
                         else "; note: the files differ from the benchmarked ones, benchmark again before proposing"))
