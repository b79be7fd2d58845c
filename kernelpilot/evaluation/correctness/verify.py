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
- the first trial of each shape set is guarded: the allocator's spare bytes hold canaries, and a write past a
  tensor's end (more threads than elements, no bound check) fails the trial (bounds.py);
- a determinism re-run on the first trial's inputs (bitwise; a difference is a note, not a failure,
  unless the re-run itself is outside tolerance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from kernelpilot.evaluation.correctness import bounds, output_reuse
from kernelpilot.evaluation.correctness.compare import (  # noqa: F401 - the comparison's names, as verify has always had them
    Outputs,
    Tolerance,
    compare,
    compare_all,
    dtype_name,
    flatten_outputs,
    normalized_difference,
    trivial_outputs,
)
from kernelpilot.evaluation.correctness.inputs import (  # noqa: F401 - verify's names, as callers have used them
    SMALL_POOL_BLOCK,
    Inputs,
    ShapeSet,
    clone_inputs,
    draw_inputs,
    inputs_equal,
    poison_allocator,
    problem_dtype,
    upcast,
)
from kernelpilot.evaluation.correctness.reference import (  # noqa: F401 - verify's names, as callers have used them
    Forward,
    Reference,
    bitwise_equal,
    reference_aliases,
    reference_outputs,
    run_model,
)
from kernelpilot.evaluation.correctness.reference_cache import (
    ReferenceCache,
    TrialReference,
    fingerprint,
)
from kernelpilot.evaluation.worker import watchdog
from kernelpilot.verdict import Correctness, TrialResult

if TYPE_CHECKING:
    import torch


STASH_BYTES = 4 << 30  # inputs kept for the determinism re-run up to this size; larger ones are drawn again


def _nbytes(inputs: Inputs) -> int:
    import torch

    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


class _Stash:
    """The first trial's pristine inputs, for the determinism re-run. Small ones are kept; large ones are
    drawn again from the trial's seed (copying gigabytes to the host and back took seconds per verdict)
    and checked against a fingerprint of the originals, so the re-run only ever sees the same values."""

    def __init__(self, pristine: Inputs, redraw: Callable[[], Inputs]) -> None:
        self.kept = pristine if _nbytes(pristine) <= STASH_BYTES else None
        self.redraw = redraw
        self.print = None if self.kept is not None else fingerprint(pristine)

    def inputs(self, device: str) -> Inputs | None:
        """A fresh copy of the inputs; None when drawing them again gives other values (a problem whose
        get_inputs draws from another random source than torch's)."""
        if self.kept is not None:
            return clone_inputs(self.kept)
        again = self.redraw()
        return again if fingerprint(again) == self.print else None


def verify(candidate: Forward, ref: Reference, tol: Tolerance, *, trials: int, distributions: list[str],
           seed: int, device: str, shape_sets: list[tuple[str, ShapeSet | None]], poison_bytes: int,
           replay: list[str] | None = None, cache: ReferenceCache | None = None,
           reused: list[str] | None = None, keep: Iterable[torch.Tensor] = ()) -> Correctness:
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
    context = cache.context(ref, tol) if cache is not None and not cache.disabled else None
    run = _Run(candidate, ref, tol, device, poison_bytes, cache, context, corr)
    first: tuple[_Stash, object] | None = None
    for shape_name, spec in shape_sets:
        for i in range(trials):
            trial_seed = seed * 1000 + i
            dist = distributions[i % len(distributions)]
            out, pristine = run.trial(i, trials, shape_name, spec, trial_seed, dist)
            if first is None:
                first = (_Stash(pristine, partial(draw_inputs, ref.module, trial_seed, dist, device, spec)), out)
            del pristine
    if first is not None:
        first_trial = (seed * 1000, distributions[0], shape_sets[0][1] if shape_sets else None)
        run.rerun(*first, first_trial, seed, distributions[0], keep, replay, reused)
    corr.discriminates = run.zero_fails and run.const_fails
    if not corr.discriminates:
        which = "a zero output" if not run.zero_fails else "a constant output"
        corr.notes.append(f"this problem cannot discriminate: {which} passes the check on every trial")
    if ref.note:
        corr.notes.append(ref.note)
    if cache is not None and cache.disabled:
        corr.notes.append(f"reference outputs are not reused between edits: {cache.disabled}")
    corr.passed = bool(corr.trials) and all(t.passed for t in corr.trials)
    return corr


class _Run:
    """One verification: the candidate, the reference and the settings every call shares, the Correctness
    it fills, and whether a zero and a constant output have failed a trial yet (the problem discriminates)."""

    def __init__(self, candidate: Forward, ref: Reference, tol: Tolerance, device: str, poison_bytes: int,
                 cache: ReferenceCache | None, context: tuple[object, ...] | None, corr: Correctness) -> None:
        self.candidate, self.ref, self.tol, self.device = candidate, ref, tol, device
        self.poison_bytes, self.cache, self.context, self.corr = poison_bytes, cache, context, corr
        self.zero_fails = self.const_fails = False
        self.previous_ref: list[torch.Tensor | None] | None = None
        self.out_of_bounds: str = ""  # the last guarded call's finding, "" when none

    def reference(self, inputs: Inputs, trial: tuple[int, str, ShapeSet | None]) -> TrialReference:
        return TrialReference(self.cache, self.context, self.ref, inputs, self.device, trial, reference_outputs)

    def call(self, inputs: Inputs, what: str, *, guard: bool = False) -> Outputs:
        """The candidate on ``inputs``, the allocator poisoned first, under the watchdog's allowance; ``guard``:
        with guard bands past every tensor's end (bounds.py), the finding in ``out_of_bounds``."""
        poison_allocator(self.poison_bytes, self.device)
        with watchdog.calls("verify", what):
            if not (guard and str(self.device).startswith("cuda")):
                return run_model(self.candidate, inputs, self.device)
            if not bounds.enabled():
                note = "writes out of bounds not checked: KERNELPILOT_BOUNDS_CHECK=0"
                if note not in self.corr.notes:
                    self.corr.notes.append(note)
                return run_model(self.candidate, inputs, self.device)
            try:
                out, overruns, error = bounds.guarded(lambda: run_model(self.candidate, inputs, self.device),
                                                      self.device)
            except bounds.BoundsCheckError as exc:
                out, overruns, error = run_model(self.candidate, inputs, self.device), [], str(exc)
            if error:  # fails closed
                self.out_of_bounds = (f"the check for writes out of bounds could not run ({error}); "
                                      "KERNELPILOT_BOUNDS_CHECK=0 turns it off")
                return out
            self.out_of_bounds = "; ".join(o.describe() for o in overruns[:3])
            self.corr.in_bounds = not overruns and self.corr.in_bounds is not False
            return out

    def trial(self, i: int, trials: int, shape_name: str, spec: ShapeSet | None, trial_seed: int,
              dist: str) -> tuple[Outputs, Inputs]:
        """Trial ``i``: fresh inputs, the candidate and the reference in this trial's order, the comparison, the
        checks on its inputs and storage; the candidate's output and the pristine inputs."""
        corr, device = self.corr, self.device
        order = "candidate_first" if i % 2 == 0 else "reference_first"
        inputs = draw_inputs(self.ref.module, trial_seed, dist, device, spec)
        pristine = clone_inputs(inputs)
        tref = self.reference(pristine, (trial_seed, dist, spec))
        if order == "reference_first":
            tref.before_candidate()
        self.out_of_bounds = ""
        out = self.call(inputs, f"candidate call, trial {i + 1} of {trials} ({shape_name} shapes, "
                                f"{dist} inputs, {order.replace('_', ' ')})", guard=i == 0)
        out_ref, out64 = tref.outputs()
        corr.references_cached += int(tref.cached)
        res = compare_all(out, out_ref, out64, self.tol)
        tr = TrialResult(seed=trial_seed, distribution=dist, order=order, shape_set=shape_name)
        for key in ("max_abs_error", "max_rel_error", "normalized_error", "reference_normalized_error"):
            setattr(tr, key, res.get(key))
        tr.mismatched, tr.total, tr.passed, tr.message = res["mismatched"], res["total"], res["passed"], res["message"]
        if not inputs_equal(inputs, pristine):
            corr.inputs_unmodified, tr.passed = False, False
            tr.message = "the candidate modified its inputs in place"
        if self.out_of_bounds:
            tr.passed = False
            tr.message = f"{tr.message}; {self.out_of_bounds}" if tr.message else self.out_of_bounds
        aliased = output_reuse.input_aliases(out, inputs)
        if res.get("unwritten"):
            corr.fully_written = False
        self.judge_trivial(out_ref, out64)
        corr.trials.append(tr)
        out_ref = out64 = None  # freed before the alias judgement's one more reference call
        if aliased:
            _judge_aliases(corr, tr, aliased, self.ref, pristine, device)
        del inputs, tref
        return out, pristine

    def judge_trivial(self, out_ref: Outputs, out64: Outputs) -> None:
        """Put a zero and a constant output through this trial's check, until both have failed one."""
        if not (self.zero_fails and self.const_fails):  # once both have failed a trial, the problem discriminates
            zeros, consts = trivial_outputs(out_ref, self.previous_ref)
            if not self.zero_fails:
                self.zero_fails = not compare_all(zeros, out_ref, out64, self.tol)["passed"]
            if consts is not None and not self.const_fails:
                self.const_fails = not compare_all(consts, out_ref, out64, self.tol)["passed"]
        self.previous_ref = [o if o.numel() <= 1 else None for o in flatten_outputs(out_ref)]

    def rerun(self, stash: _Stash, out0: object, first_trial: tuple[int, str, ShapeSet | None], seed: int,
              dist: str, keep: Iterable[torch.Tensor], replay: list[str] | None, reused: list[str] | None) -> None:
        """The determinism re-run on the first trial's inputs and, with ``replay``, one more call on the very
        same input tensors (a result cache, or an output buffer written again)."""
        corr, device = self.corr, self.device
        rerun_inputs = stash.inputs(device)
        if rerun_inputs is None:
            corr.notes.append("determinism re-run skipped: the problem's get_inputs does not give the same values "
                              "again from torch's seed, and its inputs are too large to keep")
            return
        again = self.call(rerun_inputs, "candidate call, determinism re-run")
        shared = _shares_storage(out0, again)  # the first output's storage came back: replayed, or written again
        if shared:
            corr.notes.append("determinism not judged: the re-run returned the first call's output storage")
        else:
            _determinism(corr, out0, again, stash, device,
                         lambda inputs: self.reference(inputs, first_trial).outputs(), self.tol, seed, dist)
        del out0
        if replay is not None:
            # the very same input tensors once more, the last output alive and marked: a result cache keyed on
            # the inputs' addresses and a few sampled values (KernelBench's timing reuses one input set) hits
            # here, and a buffer written again is told from one replayed (output_reuse.py)
            poison_allocator(self.poison_bytes, device)
            with watchdog.calls("verify", "candidate call, the re-run's input tensors once more"):
                found = output_reuse.probe(lambda: run_model(self.candidate, rerun_inputs, device), again,
                                           rerun_inputs, list(keep))
            if found is None and shared:  # two calls gave one storage, the third another: not seen written
                found = ("replay", "the re-run on the same values returned the first call's output storage")
            if found is not None:
                outcome, evidence = found
                (reused if outcome == "reuse" and reused is not None else replay).append(evidence)


def _determinism(corr: Correctness, out0: object, again: object, stash: _Stash, device: str,
                 reference: Callable[[Inputs], tuple[Outputs, Outputs]], tol: Tolerance, seed: int, dist: str) -> None:
    """Bitwise comparison of the first trial's output with the re-run's; a difference is a note, a re-run
    outside tolerance a failed trial."""
    same = all(bitwise_equal(a, b) for a, b in zip(flatten_outputs(out0), flatten_outputs(again)))
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


def _judge_aliases(corr: Correctness, tr: TrialResult, aliased: frozenset[int], ref: Reference,
                   pristine: Inputs, device: str) -> None:
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


def _shares_storage(first: object, second: object) -> bool:
    """Whether two outputs share storage."""
    return bool(output_reuse.storages(first) & output_reuse.storages(second))
