"""Correctness: does the candidate compute the problem's function? (worker side; imports torch lazily)

Defences, one per known way to pass a naive check (see the reference doc, section 3.2):

- fresh inputs per trial from several distributions (``normal``, ``uniform``, ``scaled`` = normal times
  a random 10^U(-3,3) per tensor and trial; ``native`` keeps get_inputs' own values). A float input
  that get_inputs drew non-negative stays non-negative (|x|), so log/sqrt problems keep their domain;
  integer inputs keep get_inputs' own generator, seeded with the trial seed;
- the reference runs in the problem dtype and in float64 (an upcast copy of the model and inputs);
- before every candidate run the caching allocator is emptied and refilled with NaN blocks, so an
  output that is not fully written keeps NaN where the reference has none (stale-memory reuse);
- candidate-first and reference-first orders alternate; the reference always runs on pristine clones
  (its outputs are kept per input seed between edits in the warm worker: reference_cache.py);
- inputs are compared bitwise with a pristine clone after the candidate ran (input mutation), and an output
  that is an input's storage where the reference's is a new tensor counts as one (a result written into
  its input, even where the values written are the input's own: ReLU on non-negative inputs);
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

from kernelpilot.evaluation.correctness import output_reuse
from kernelpilot.evaluation.worker import watchdog
from kernelpilot.evaluation.correctness.compare import (  # noqa: F401 - the comparison's names, as verify has always had them
    compare,
    compare_all,
    dtype_name,
    flatten_outputs,
    normalized_difference,
    trivial_outputs,
)
from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache, TrialReference, fingerprint
from kernelpilot.verdict import Correctness, TrialResult

SMALL_POOL_BLOCK = 1 << 20  # the caching allocator's small-pool limit (1 MiB)


@dataclass
class Tolerance:
    atol: float
    rtol: float
    max_normalized: float


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
    """Float64 copies of the float inputs (new tensors, also for inputs that are float64 already)."""
    import torch

    return [(x.double() if x.dtype != torch.float64 else x.clone()) if isinstance(x, torch.Tensor) and x.is_floating_point()
            else (x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x)) for x in inputs]


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


# ---- the check ----------------------------------------------------------------------------------
@dataclass
class Reference:
    model: Any  # problem dtype
    model64: Any | None  # float64 copy, or None when it cannot run in float64
    module: Any  # the problem module (get_inputs)
    note: str = ""
    # positions of the reference's outputs that are its inputs' storage (``return x.view(...)``); found the
    # first time a candidate's output is an input's storage, then kept with the problem
    input_aliases: frozenset[int] | None = None


def _run(fn: Callable[..., Any], inputs: list[Any], device: str) -> Any:
    import torch

    with torch.no_grad():
        out = fn(*inputs)
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    return out


def reference_aliases(ref: Reference, pristine: list[Any], device: str) -> frozenset[int] | None:
    """Which of the reference's outputs are its inputs' storage (one more reference call, once per problem);
    None when that call does not fit in memory beside the trial's tensors."""
    import torch

    if ref.input_aliases is None:
        try:
            inputs = clone_inputs(pristine)
            ref.input_aliases = output_reuse.input_aliases(_run(ref.model, inputs, device), inputs)
        except torch.cuda.OutOfMemoryError:
            from kernelpilot.evaluation.worker import memory

            memory.release(device)
            return None
    return ref.input_aliases


def reference_outputs(ref: Reference, pristine: list[Any], device: str) -> tuple[Any, Any]:
    out = _run(ref.model, clone_inputs(pristine), device)
    if ref.model64 is None:
        return out, out
    import torch

    oom = ""
    try:
        return out, _run(ref.model64, upcast(pristine), device)
    except torch.cuda.OutOfMemoryError as exc:
        oom = str(exc)
    except Exception as exc:  # an op without a float64 kernel: fall back to the dtype reference
        ref.model64, ref.note = None, f"float64 reference unavailable ({type(exc).__name__}: {exc}); compared with the problem dtype"
        return out, out
    # The float64 copy of a large problem may not fit beside the candidate's tensors: compare with PyTorch's
    # own result in the problem's dtype, and say what that bound means (freed outside the except block,
    # whose traceback still holds the failed call's tensors)
    from kernelpilot.evaluation.worker import memory

    need = memory.requested_bytes(oom)
    ref.model64 = None
    memory.release(device)
    ref.note = ("the float64 reference did not fit in GPU memory" + (f" (it asked for {need / 2**30:.1f} GiB more)"
                if need else "") + "; outputs were compared with PyTorch's own result in the problem's dtype "
                "(atol/rtol as usual, normalised error within the dtype's threshold against that result; its "
                "own error against the exact result is not measured for this problem)")
    return out, out


STASH_BYTES = 4 << 30  # inputs kept for the determinism re-run up to this size; larger ones are drawn again


def _nbytes(inputs: list[Any]) -> int:
    import torch

    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


class _Stash:
    """The first trial's pristine inputs, for the determinism re-run. Small ones are kept; large ones are
    drawn again from the trial's seed (copying gigabytes to the host and back took seconds per verdict)
    and checked against a fingerprint of the originals, so the re-run only ever sees the same values."""

    def __init__(self, pristine: list[Any], redraw: Any) -> None:
        self.kept = pristine if _nbytes(pristine) <= STASH_BYTES else None
        self.redraw = redraw
        self.print = None if self.kept is not None else fingerprint(pristine)

    def inputs(self, device: str) -> list[Any] | None:
        """A fresh copy of the inputs; None when drawing them again gives other values (a problem whose
        get_inputs draws from another random source than torch's)."""
        if self.kept is not None:
            return clone_inputs(self.kept)
        again = self.redraw()
        return again if fingerprint(again) == self.print else None


def verify(candidate: Any, ref: Reference, tol: Tolerance, *, trials: int, distributions: list[str],
           seed: int, device: str, shape_sets: list[tuple[str, Any]], poison_bytes: int,
           replay: list[str] | None = None, cache: ReferenceCache | None = None,
           reused: list[str] | None = None, keep: Any = ()) -> Correctness:
    """Run every trial; raises whatever the candidate raises (the worker turns it into a verdict).

    ``replay`` collects evidence of a result cache: a call on the very same input tensors returned the
    storage of the last output, still alive, without writing it; ``reused`` evidence of an output buffer
    the candidate writes again on every call (output_reuse.py tells the two apart; without ``reused`` both
    go to ``replay``). ``keep``: tensors never overwritten to tell them apart (the model's parameters and
    buffers). ``cache``: the problem's
    reference outputs per input seed, kept between edits (reference_cache.py says what is reused, and
    why reference-first trials still call the dtype reference); ``Correctness.references_cached``
    counts the trials it served.
    """
    corr = Correctness(atol=tol.atol, rtol=tol.rtol, max_normalized_error=tol.max_normalized)
    corr.inputs_unmodified, corr.fully_written, corr.outputs_own_storage = True, True, True
    zero_fails = const_fails = False
    previous_ref: list[Any] | None = None
    first: tuple[list[Any], Any] | None = None
    context = cache.context(ref, tol) if cache is not None and not cache.disabled else None
    first_trial: tuple[int, str, Any] = (seed * 1000, distributions[0], shape_sets[0][1] if shape_sets else None)
    for shape_name, spec in shape_sets:
        for i in range(trials):
            trial_seed = seed * 1000 + i
            dist = distributions[i % len(distributions)]
            order = "candidate_first" if i % 2 == 0 else "reference_first"
            inputs = draw_inputs(ref.module, trial_seed, dist, device, spec)
            pristine = clone_inputs(inputs)
            tref = TrialReference(cache, context, ref, pristine, device, (trial_seed, dist, spec), reference_outputs)
            if order == "reference_first":
                tref.before_candidate()
            poison_allocator(poison_bytes, device)
            with watchdog.calls("verify", f"candidate call, trial {i + 1} of {trials} ({shape_name} shapes, "
                                          f"{dist} inputs, {order.replace('_', ' ')})"):
                out = _run(candidate, inputs, device)
            out_ref, out64 = tref.outputs()
            corr.references_cached += int(tref.cached)
            res = compare_all(out, out_ref, out64, tol)
            tr = TrialResult(seed=trial_seed, distribution=dist, order=order, shape_set=shape_name)
            for key in ("max_abs_error", "max_rel_error", "normalized_error", "reference_normalized_error"):
                setattr(tr, key, res.get(key))
            tr.mismatched, tr.total, tr.passed, tr.message = res["mismatched"], res["total"], res["passed"], res["message"]
            if not inputs_equal(inputs, pristine):
                corr.inputs_unmodified, tr.passed = False, False
                tr.message = "the candidate modified its inputs in place"
            aliased = output_reuse.input_aliases(out, inputs)
            if res.get("unwritten"):
                corr.fully_written = False
            if not (zero_fails and const_fails):  # once both have failed a trial, the problem discriminates
                zeros, consts = trivial_outputs(out_ref, previous_ref)
                if not zero_fails:
                    zero_fails = not compare_all(zeros, out_ref, out64, tol)["passed"]
                if consts is not None and not const_fails:
                    const_fails = not compare_all(consts, out_ref, out64, tol)["passed"]
            previous_ref = [o if o.numel() <= 1 else None for o in flatten_outputs(out_ref)]
            corr.trials.append(tr)
            out_ref = out64 = None  # freed before the alias judgement's one more reference call
            if aliased:
                _judge_aliases(corr, tr, aliased, ref, pristine, device)
            if first is None:
                first = (_Stash(pristine, lambda s=trial_seed, d=dist, p=spec: draw_inputs(ref.module, s, d, device, p)),
                         out)
            del inputs, pristine, tref
    rerun_inputs = first[0].inputs(device) if first is not None else None
    if first is not None and rerun_inputs is None:
        corr.notes.append("determinism re-run skipped: the problem's get_inputs does not give the same values again "
                          "from torch's seed, and its inputs are too large to keep")
    elif first is not None:
        stash, out0 = first
        poison_allocator(poison_bytes, device)
        with watchdog.calls("verify", "candidate call, determinism re-run"):
            again = _run(candidate, rerun_inputs, device)
        shared = _shares_storage(out0, again)  # the first output's storage came back: replayed, or written again
        if shared:
            corr.notes.append("determinism not judged: the re-run returned the first call's output storage")
        else:
            _determinism(corr, out0, again, stash, device, lambda inputs: TrialReference(
                cache, context, ref, inputs, device, first_trial, reference_outputs).outputs(), tol, seed,
                distributions[0])
        del out0
        if replay is not None:
            # the very same input tensors once more, the last output alive and marked: a result cache keyed on
            # the inputs' addresses and a few sampled values (KernelBench's timing reuses one input set) hits
            # here, and a buffer written again is told from one replayed (output_reuse.py)
            poison_allocator(poison_bytes, device)
            with watchdog.calls("verify", "candidate call, the re-run's input tensors once more"):
                found = output_reuse.probe(lambda: _run(candidate, rerun_inputs, device), again, rerun_inputs,
                                           list(keep))
            if found is None and shared:  # two calls gave one storage, the third another: not seen written
                found = ("replay", "the re-run on the same values returned the first call's output storage")
            if found is not None:
                outcome, evidence = found
                (reused if outcome == "reuse" and reused is not None else replay).append(evidence)
        del rerun_inputs, again
    corr.discriminates = zero_fails and const_fails
    if not corr.discriminates:
        which = "a zero output" if not zero_fails else "a constant output"
        corr.notes.append(f"this problem cannot discriminate: {which} passes the check on every trial")
    if ref.note:
        corr.notes.append(ref.note)
    if cache is not None and cache.disabled:
        corr.notes.append(f"reference outputs are not reused between edits: {cache.disabled}")
    corr.passed = bool(corr.trials) and all(t.passed for t in corr.trials)
    return corr


def _determinism(corr: Correctness, out0: Any, again: Any, stash: _Stash, device: str,
                 reference: Callable[[list[Any]], tuple[Any, Any]], tol: Tolerance, seed: int, dist: str) -> None:
    """Bitwise comparison of the first trial's output with the re-run's; a difference is a note, a re-run
    outside tolerance a failed trial."""
    same = all(_bitwise_equal(a, b) for a, b in zip(flatten_outputs(out0), flatten_outputs(again)))
    corr.deterministic = same
    if same:
        return
    corr.notes.append("the candidate is not bitwise deterministic across two runs on the same inputs")
    ref_inputs = stash.inputs(device)
    rerun = {"passed": True} if ref_inputs is None else compare_all(again, *reference(ref_inputs), tol)
    if not rerun["passed"]:
        corr.trials.append(TrialResult(seed=seed * 1000, distribution=dist, order="rerun", passed=False,
                                       message="determinism re-run: " + rerun["message"],
                                       normalized_error=rerun.get("normalized_error")))


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _judge_aliases(corr: Correctness, tr: TrialResult, aliased: frozenset[int], ref: Reference,
                   pristine: list[Any], device: str) -> None:
    """An output that is an input's storage, where the reference's output at that place is a new tensor: the
    candidate wrote its result into its input (values equal to the input's, as ReLU on non-negative inputs
    gives, leave the value check nothing to see) or handed the input back. Either way it is no drop-in: the
    caller's input is overwritten, or changes with the output. Inputs modified, the trial failed."""
    own = reference_aliases(ref, pristine, device)
    if own is None:
        note = ("outputs that are an input's storage not judged: the reference could not run once more beside "
                "the trial's tensors to say whether its own outputs are")
        if note not in corr.notes:
            corr.notes.append(note)
        return
    extra = sorted(aliased - own)
    if not extra:
        return
    corr.inputs_unmodified = corr.outputs_own_storage = tr.passed = False
    which = ", ".join(str(i) for i in extra)
    said = (f"output {which} is (a view of) an input's storage where the reference returns a new tensor: the "
            "candidate wrote its result into its input, or returned the input; a caller's input is overwritten, "
            "or changes with the output")
    tr.message = f"{tr.message}; {said}" if tr.message else said


def _shares_storage(first: Any, second: Any) -> bool:
    """Whether two outputs share storage."""
    return bool(output_reuse.storages(first) & output_reuse.storages(second))
