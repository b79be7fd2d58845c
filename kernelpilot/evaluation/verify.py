"""Correctness: does the candidate compute the problem's function? (worker side; imports torch lazily)

Defences, one per known way to pass a naive check (see the reference doc, section 3.2):

- fresh inputs per trial from several distributions (``normal``, ``uniform``, ``scaled`` = normal times
  a random 10^U(-3,3) per tensor and trial; ``native`` keeps get_inputs' own values). A float input
  that get_inputs drew non-negative stays non-negative (|x|), so log/sqrt problems keep their domain;
  integer inputs keep get_inputs' own generator, seeded with the trial seed;
- the reference runs in the problem dtype and in float64 (an upcast copy of the model and inputs);
- before every candidate run the caching allocator is emptied and refilled with NaN blocks, so an
  output that is not fully written keeps NaN where the reference has none (stale-memory reuse);
- candidate-first and reference-first orders alternate; the reference always runs on pristine clones;
- inputs are compared bitwise with a pristine clone after the candidate ran (input mutation);
- exact type (``type(out) is torch.Tensor``, so no lazy subclasses), shape and dtype;
- tolerance: every element within atol + rtol*|ref| of the dtype reference or of the fp64 truth (the
  latter widened by twice the dtype reference's own worst elementwise error), AND
  ||out - ref64|| / ||ref64|| <= max(threshold, 2 x the dtype reference's own normalised error);
- a zero and a constant (mean) output are put through the same check; if either passes every trial the
  problem cannot discriminate (Correctness.discriminates = False, a flag in the verdict);
- a determinism re-run on the first trial's inputs (bitwise; a difference is a note, not a failure,
  unless the re-run itself is outside tolerance).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable

from kernelpilot.evaluation import watchdog
from kernelpilot.verdict import Correctness, TrialResult

SMALL_POOL_BLOCK = 1 << 20  # the caching allocator's small-pool limit (1 MiB)


@dataclass
class Tolerance:
    atol: float
    rtol: float
    max_normalized: float


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def problem_dtype(inputs: list[Any], model: Any) -> Any:
    import torch

    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.dtype
    for p in list(model.parameters()) + list(model.buffers()):
        if p.is_floating_point():
            return p.dtype
    return torch.float32


# ---- inputs --------------------------------------------------------------------------------------
def _redraw(x: Any, distribution: str, gen: Any, device: str) -> Any:
    import torch

    if distribution == "native":
        return x.to(device)
    nonneg = bool((x >= 0).all()) if x.numel() else False
    shape = tuple(x.shape)
    if distribution == "uniform":
        v = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
        v = v if nonneg else v * 2 - 1
    else:
        v = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        if distribution == "scaled":
            exponent = torch.rand((), generator=gen, device=device).item() * 6 - 3
            v = v * (10.0**exponent)
        elif distribution != "normal":
            raise ValueError(f"unknown input distribution {distribution!r}")
        v = v.abs() if nonneg else v
    return v.to(x.dtype)


def draw_inputs(module: Any, seed: int, distribution: str, device: str, shape_spec: Any = None) -> list[Any]:
    """One trial's inputs: get_inputs() (or an extra shape set) seeded with ``seed``, floats re-drawn on ``device``."""
    import torch

    from kernelpilot.problem import make_inputs

    torch.manual_seed(seed)
    # get_inputs() runs with ``device`` as the default device: problem files draw their tensors with
    # torch.randn(...) and no device, and drawing a 1 GiB bf16 tensor on the CPU takes seconds per call
    # (and per trial, per timing input set) only to be re-drawn on the GPU below.
    with torch.device(device):
        raw = list(make_inputs(module, shape_spec))  # shape_spec: an extra_shapes entry {name, inputs} or None
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    out: list[Any] = []
    for x in raw:
        if isinstance(x, torch.Tensor):
            out.append(_redraw(x, distribution, gen, device) if x.is_floating_point() else x.to(device))
        else:
            out.append(x)
    return out


def clone_inputs(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]


def inputs_equal(a: list[Any], b: list[Any]) -> bool:
    import torch

    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point():
                same = (x == y) | (torch.isnan(x) & torch.isnan(y))
                if not bool(same.all()):
                    return False
            elif not torch.equal(x, y):
                return False
    return True


def upcast(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


# ---- poisoning ----------------------------------------------------------------------------------
def poison_allocator(nbytes: int, device: str) -> None:
    """Leave every free block of the caching allocator NaN-filled, plus fresh NaN segments.

    After ``empty_cache`` the only free blocks left are fragments of segments that still hold live
    tensors; the allocator snapshot names them, and allocating exactly their sizes (best fit) claims
    them so they can be filled. Then a block of ``nbytes`` (large pool) and 64 x 1 MiB (small pool)
    of NaN are allocated and freed, so new allocations land on NaN too.
    """
    import torch

    if not str(device).startswith("cuda"):
        return
    nan = float("nan")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    held = []
    for _ in range(4):
        try:
            free = [(seg.get("segment_type", "large"), int(b["size"])) for seg in torch.cuda.memory_snapshot()
                    for b in seg.get("blocks", []) if b.get("state") == "inactive"]
        except Exception:
            break
        if not free:
            break
        for kind, size in sorted(free, key=lambda f: f[1]):
            while size >= 512:
                chunk = min(size, SMALL_POOL_BLOCK) if kind == "small" else size
                block = torch.empty(chunk, dtype=torch.uint8, device=device)
                block.view(torch.float32)[: chunk // 4].fill_(nan)
                held.append(block)
                size -= chunk
    free_now, _total = torch.cuda.mem_get_info()
    big = max(min(int(nbytes), int(free_now * 0.5)), 0)
    if big >= SMALL_POOL_BLOCK * 2:
        held.append(torch.full((big // 4,), nan, dtype=torch.float32, device=device))
    for _ in range(64):  # 64 x 1 MiB: 32 fresh small-pool segments of 2 MiB, all NaN
        held.append(torch.full((SMALL_POOL_BLOCK // 4,), nan, dtype=torch.float32, device=device))
    torch.cuda.synchronize()
    del held


# ---- comparison ---------------------------------------------------------------------------------
def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        flat: list[Any] = []
        for o in out:
            flat.extend(flatten_outputs(o))
        return flat
    return [out]


def compare(out: Any, ref: Any, ref64: Any, tol: Tolerance) -> dict[str, Any]:
    """Compare one output tensor; returns the fields of a TrialResult plus ``unwritten``."""
    import torch

    res: dict[str, Any] = {"passed": False, "mismatched": 0, "total": 0, "unwritten": 0, "message": ""}
    if type(out) is not torch.Tensor:
        res["message"] = f"output is a {type(out).__module__}.{type(out).__qualname__}, not a plain torch.Tensor"
        return res
    if tuple(out.shape) != tuple(ref.shape):
        res["message"] = f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
        return res
    if out.dtype != ref.dtype:
        res["message"] = f"output dtype {dtype_name(out.dtype)} != expected {dtype_name(ref.dtype)}"
        return res
    if out.device != ref.device:
        res["message"] = f"output on {out.device}, expected {ref.device}"
        return res
    o, r, t = out.detach().double(), ref.detach().double(), ref64.detach().double()
    tq = ref64.detach().to(ref.dtype).double() if ref.is_floating_point() else t
    finite = torch.isfinite(t) & torch.isfinite(tq)
    total = o.numel()
    res["total"] = total
    # where the truth overflows / is NaN in this dtype, the output must match one reference exactly
    nonfin_ok = (o == tq) | (o == r) | (torch.isnan(o) & (torch.isnan(tq) | torch.isnan(r)))
    ok_dtype = (o - r).abs() <= tol.atol + tol.rtol * r.abs()
    # Against the truth, an element may also be off by twice the worst error the problem's own dtype
    # computation makes: where a result cancels to near zero (a sum of large signed terms, inputs
    # scaled by 1e3), a reordered but more accurate candidate differs from both references by more
    # than atol, exactly as the reference differs from the truth.
    ref_gap = torch.where(finite & torch.isfinite(r), (r - t).abs(), torch.zeros_like(t))
    slack = 2.0 * float(ref_gap.max()) if total and ref.dtype != torch.float64 else 0.0
    ok_true = (o - t).abs() <= tol.atol + slack + tol.rtol * t.abs()
    ok = torch.where(finite, ok_dtype | ok_true, nonfin_ok)
    mismatched = int((~ok).sum())
    unwritten = int((torch.isnan(o) & finite).sum())
    err = torch.where(finite, (o - t).abs(), torch.zeros_like(t))
    tf = torch.where(finite, t, torch.zeros_like(t))
    rf = torch.where(finite & torch.isfinite(r), r, tf)
    ref_norm = float(torch.linalg.vector_norm(tf)) if total else 0.0
    err_norm = float(torch.linalg.vector_norm(err)) if total else 0.0
    ref_err_norm = float(torch.linalg.vector_norm(rf - tf)) if total else 0.0
    if ref_norm > 0:
        normalized, ref_normalized = err_norm / ref_norm, ref_err_norm / ref_norm
        threshold = max(tol.max_normalized, 2.0 * ref_normalized)
    else:  # all-zero truth: fall back to the absolute error
        normalized, ref_normalized = err_norm, ref_err_norm
        threshold = max(tol.atol, 2.0 * ref_normalized)
    if unwritten or math.isnan(normalized):
        normalized = float("inf")
    max_abs = float(err.max()) if total else 0.0
    max_rel = float((err / tf.abs().clamp_min(max(tol.atol, 1e-30))).max()) if total else 0.0
    res.update(
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        normalized_error=normalized,
        reference_normalized_error=ref_normalized,
        mismatched=mismatched,
        unwritten=unwritten,
        threshold=threshold,
    )
    res["passed"] = mismatched == 0 and normalized <= threshold
    if unwritten:
        res["message"] = f"{unwritten} of {total} output elements were never written (NaN poison left)"
    elif mismatched:
        res["message"] = (f"{mismatched} of {total} elements outside atol={tol.atol:g} rtol={tol.rtol:g}"
                          + (f" (+{slack:.3g}: twice the dtype reference's worst error)" if slack > tol.atol else ""))
    elif not res["passed"]:
        res["message"] = f"normalised error {normalized:.3g} > threshold {threshold:.3g}"
    return res


def compare_all(outs: Any, refs: Any, refs64: Any, tol: Tolerance) -> dict[str, Any]:
    """Compare (possibly nested) outputs; the worst element decides."""
    o, r, t = flatten_outputs(outs), flatten_outputs(refs), flatten_outputs(refs64)
    if len(o) != len(r):
        return {"passed": False, "message": f"{len(o)} outputs, expected {len(r)}", "mismatched": 0, "total": 0}
    merged: dict[str, Any] = {"passed": True, "mismatched": 0, "total": 0, "unwritten": 0, "message": ""}
    for i, (a, b, c) in enumerate(zip(o, r, t)):
        res = compare(a, b, c, tol)
        merged["mismatched"] += res.get("mismatched", 0)
        merged["total"] += res.get("total", 0)
        merged["unwritten"] += res.get("unwritten", 0)
        for key in ("max_abs_error", "max_rel_error", "normalized_error", "reference_normalized_error"):
            if res.get(key) is not None:
                merged[key] = max(merged.get(key, 0.0), res[key])
        if not res["passed"]:
            merged["passed"] = False
            prefix = f"output {i}: " if len(o) > 1 else ""
            merged["message"] = merged["message"] or prefix + res["message"]
    return merged


def trivial_outputs(refs: Any, previous: Any = None) -> tuple[list[Any], list[Any] | None]:
    """A zero output and a constant output, shaped like the reference.

    The constant is the mean of the reference, except for single-element outputs (a mean loss), where
    that mean *is* the reference: there the constant is the previous trial's value (what a hard-coded
    result would return), and None on the first trial.
    """
    import torch

    outs = flatten_outputs(refs)
    prev = list(previous or [])  # single-element outputs of the previous trial (None for the others)
    sources = [r if r.numel() > 1 else (prev[i] if i < len(prev) else None) for i, r in enumerate(outs)]
    zeros = [torch.zeros_like(r) for r in outs]
    if any(src is None for src in sources):
        return zeros, None

    def mean(src: Any) -> float:
        d = src.double()
        finite = d[torch.isfinite(d)]
        return float(finite.mean()) if finite.numel() else 0.0

    return zeros, [torch.full_like(r, mean(src)) for r, src in zip(outs, sources)]


# ---- the check ----------------------------------------------------------------------------------
@dataclass
class Reference:
    model: Any  # problem dtype
    model64: Any | None  # float64 copy, or None when it cannot run in float64
    module: Any  # the problem module (get_inputs)
    note: str = ""


def _run(fn: Callable[..., Any], inputs: list[Any], device: str) -> Any:
    import torch

    with torch.no_grad():
        out = fn(*inputs)
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    return out


def reference_outputs(ref: Reference, pristine: list[Any], device: str) -> tuple[Any, Any]:
    out = _run(ref.model, clone_inputs(pristine), device)
    if ref.model64 is None:
        return out, out
    try:
        return out, _run(ref.model64, upcast(clone_inputs(pristine)), device)
    except Exception as exc:  # an op without a float64 kernel: fall back to the dtype reference
        ref.model64, ref.note = None, f"float64 reference unavailable ({type(exc).__name__}: {exc}); compared with the problem dtype"
        return out, out


def verify(candidate: Any, ref: Reference, tol: Tolerance, *, trials: int, distributions: list[str],
           seed: int, device: str, shape_sets: list[tuple[str, Any]], poison_bytes: int,
           replay: list[str] | None = None) -> Correctness:
    """Run every trial; raises whatever the candidate raises (the worker turns it into a verdict).

    ``replay`` collects evidence of a result cache: the re-run returned the very storage of the first
    output, which is still alive, so it cannot have been computed afresh.
    """
    corr = Correctness(atol=tol.atol, rtol=tol.rtol, max_normalized_error=tol.max_normalized)
    corr.inputs_unmodified, corr.fully_written = True, True
    zero_fails = const_fails = False
    previous_ref: list[Any] | None = None
    first: tuple[list[Any], Any] | None = None
    for shape_name, spec in shape_sets:
        for i in range(trials):
            trial_seed = seed * 1000 + i
            dist = distributions[i % len(distributions)]
            order = "candidate_first" if i % 2 == 0 else "reference_first"
            inputs = draw_inputs(ref.module, trial_seed, dist, device, spec)
            pristine = clone_inputs(inputs)
            if order == "reference_first":
                out_ref, out64 = reference_outputs(ref, pristine, device)
            poison_allocator(poison_bytes, device)
            with watchdog.calls("verify", f"candidate call, trial {i + 1} of {trials} ({shape_name} shapes, "
                                          f"{dist} inputs, {order.replace('_', ' ')})"):
                out = _run(candidate, inputs, device)
            if order == "candidate_first":
                out_ref, out64 = reference_outputs(ref, pristine, device)
            res = compare_all(out, out_ref, out64, tol)
            tr = TrialResult(seed=trial_seed, distribution=dist, order=order, shape_set=shape_name)
            for key in ("max_abs_error", "max_rel_error", "normalized_error", "reference_normalized_error"):
                setattr(tr, key, res.get(key))
            tr.mismatched, tr.total, tr.passed, tr.message = res["mismatched"], res["total"], res["passed"], res["message"]
            if not inputs_equal(inputs, pristine):
                corr.inputs_unmodified, tr.passed = False, False
                tr.message = "the candidate modified its inputs in place"
            if res.get("unwritten"):
                corr.fully_written = False
            zeros, consts = trivial_outputs(out_ref, previous_ref)
            zero_fails |= not compare_all(zeros, out_ref, out64, tol)["passed"]
            if consts is not None:
                const_fails |= not compare_all(consts, out_ref, out64, tol)["passed"]
            previous_ref = [o if o.numel() <= 1 else None for o in flatten_outputs(out_ref)]
            corr.trials.append(tr)
            if first is None:
                first = (pristine, out)
            del out_ref, out64, inputs
    if first is not None:
        pristine, out0 = first
        poison_allocator(poison_bytes, device)
        with watchdog.calls("verify", "candidate call, determinism re-run"):
            again = _run(candidate, clone_inputs(pristine), device)
        if replay is not None and _shares_storage(out0, again):
            replay.append("the re-run on the same values returned the first call's output storage")
        same = all(_bitwise_equal(a, b) for a, b in zip(flatten_outputs(out0), flatten_outputs(again)))
        corr.deterministic = same
        if not same:
            out_ref, out64 = reference_outputs(ref, pristine, device)
            rerun = compare_all(again, out_ref, out64, tol)
            corr.notes.append("the candidate is not bitwise deterministic across two runs on the same inputs")
            if not rerun["passed"]:
                corr.trials.append(TrialResult(seed=seed * 1000, distribution=distributions[0], order="rerun",
                                               passed=False, message="determinism re-run: " + rerun["message"],
                                               normalized_error=rerun.get("normalized_error")))
    corr.discriminates = zero_fails and const_fails
    if not corr.discriminates:
        which = "a zero output" if not zero_fails else "a constant output"
        corr.notes.append(f"this problem cannot discriminate: {which} passes the check on every trial")
    if ref.note:
        corr.notes.append(ref.note)
    corr.passed = bool(corr.trials) and all(t.passed for t in corr.trials)
    return corr


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _shares_storage(first: Any, second: Any) -> bool:
    import torch

    def ptrs(out: Any) -> set[int]:
        return {o.untyped_storage().data_ptr() for o in flatten_outputs(out)
                if isinstance(o, torch.Tensor) and o.numel()}

    return bool(ptrs(first) & ptrs(second))
