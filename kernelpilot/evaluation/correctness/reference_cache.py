"""Reference outputs kept per input seed inside the warm worker, so an edit's verification does not
compute the problem's reference again (worker side; imports torch lazily).

Trial i of a verdict draws its inputs from the seed ``seed * 1000 + i`` with distribution
``distributions[i % n]`` and shape set ``spec``. For the same problem (the ProblemState: its path,
bytes, seed and device; the cache lives on it and is dropped with it by ``forget_problems``), the same
reference weights (a fingerprint of the state_dicts of the dtype model and its float64 copy), the same
global torch state (``global_state.Snapshot``), dtype, tolerance and float64 availability, those inputs
and therefore the reference's dtype output and float64 output are the same every edit. They are kept
here and reused; the key holds all of the above, and each entry also holds a fingerprint of the
pristine inputs it was computed on (shapes, dtypes, float64 sums over 64 lanes and a position-weighted
sum of row sums), checked on every lookup: a problem whose get_inputs draws from another source than
torch's seed gets other inputs, misses, and disables the cache for that problem.

What does not change: the candidate is called on freshly drawn inputs every trial, the inputs-unmodified
check compares them with a pristine clone, the allocator is poisoned before every candidate call, and
the comparison (compare_all, trivial outputs) sees the very values a fresh reference call gives.

Nondeterministic references (dropout, atomics, a forward that changes its own buffers): on a miss the
dtype and float64 references are computed a second time on a fresh copy of the pristine inputs (after
the candidate call, so the state the candidate runs in is what it was without the cache) and the entry
is stored only when both are bitwise equal to the first; otherwise the cache is disabled for the
problem (a note says so). Every reference-first hit re-checks it too (below). That second computation
starts with a problem's second verdict: its first (a suite's one candidate per problem) keeps nothing and
costs nothing extra, so the entries serve an edit loop from its third verdict on.

Order. Candidate-first trials catch candidates that depend on state the reference left (its output or
temporaries in memory, its library handles, its RNG draws); reference-first trials catch candidates that
break after the reference ran (a library handle, workspace, algorithm choice or RNG state the reference
set up). A cached reference-first trial that skipped the reference call would run the candidate in the
candidate-first state and the alternation would test nothing, so a reference-first trial still calls the
dtype reference on a pristine copy right before the candidate, as without the cache, and compares that
output bitwise with the cached one (a mismatch disables the cache and the trial uses fresh outputs). Only
the float64 reference is served from the cache there; the state it leaves (float64 temporaries, freed
and poisoned before the candidate runs) is not state a candidate in the problem dtype works with.
Candidate-first trials call no reference at all. Entries are packed into one uint8 buffer each and only
unpacked (views) after the candidate call, so during a candidate-first call no tensor shaped like the
reference output exists for a candidate to find (without the cache none existed either).

Memory: an entry is stored only if its bytes fit the budget, 10% of free device memory (plus what the
cache holds) on CUDA, 256 MiB on the CPU, at most ``$KERNELPILOT_REFERENCE_CACHE_BYTES`` when set (0
turns the cache off). Entries of another context (other weights, settings or global state: no trial of this
verification can hit them) are evicted to make room; entries of this context are not, and one that does not
fit beside them is refused before its second computation. A verification visits its trials in the same order
every edit, and evicting the least recently used entry to keep the newest one only moves the miss: with a
budget smaller than the trials' references (softmax's 1 GiB bf16 input, 5 GiB of references a trial, five
trials, a budget of about 7 GiB on an H100), every trial missed, and paid the reference twice (the second
computation that proves an entry) on every edit. Now the first entries stay and are served on every edit, and
the rest cost what they cost without a cache. A budget that shrank (less free memory) is kept at the next
verification's start: this context's least recently used entries go.

Measured (benchmarks/verify_cache.py --edits 5, the shared 2-core CPU machine, 2026-12-02, torch
2.14.1, 5 trials, PyTorch candidate equal to the reference; noisy, other jobs ran beside it): softmax
512x4096 float32, verify phase of the later edits (median of 4) 1.63 s without the cache, 1.29 s with it
(5 of 5 trials from the cache; time in reference_outputs 0.03 s -> 0.00 s); matmul 384^3, 0.07 s -> 0.06 s.
On the CPU the reference calls are a few percent of the phase (compare's elementwise passes dominate);
the first edit pays one more dtype and float64 call per trial (the double computation). No GPU figure yet.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelpilot.evaluation.correctness import compare
from kernelpilot.evaluation.correctness.compare import (
    Outputs,
    Tolerance,
    flatten_outputs,
)
from kernelpilot.evaluation.correctness.inputs import Inputs, ShapeSet, clone_inputs
from kernelpilot.evaluation.correctness.reference import (
    Reference,
    bitwise_equal,
    run_model,
)
from kernelpilot.evaluation.worker import global_state

if TYPE_CHECKING:
    import torch

FREE_FRACTION = 0.10  # of free device memory (plus what the cache holds)
CPU_BYTES = 256 << 20
ENV = "KERNELPILOT_REFERENCE_CACHE_BYTES"
ALIGN = 16  # bytes; every packed output starts at a multiple (complex128's element size)

# what fingerprint() gives: shapes, dtypes, devices (repr of the other inputs) and float64 sums
Fingerprint = list[object]
# a trial's inputs: (its seed, its distribution, its extra shape set or None for the default shapes)
Trial = tuple[int, str, ShapeSet | None]


@dataclass
class Entry:
    packed: torch.Tensor  # one uint8 tensor on the device
    layout: list[tuple[int, int, tuple[int, ...], torch.dtype]]  # (offset, bytes, shape, dtype) per flat output
    n_ref: int  # the first n_ref are the dtype outputs, the rest the float64 ones (none: same as dtype)
    inputs_print: Fingerprint
    nbytes: int


def _tensors(out: object) -> list[torch.Tensor] | None:
    """The flat outputs when every one is a plain tensor (what the cache can hold), else None."""
    import torch

    flat = flatten_outputs(out)
    return flat if flat and all(type(o) is torch.Tensor for o in flat) else None


def _sizes(flat: list[torch.Tensor]) -> int:
    return sum(-(-o.numel() * o.element_size() // ALIGN) * ALIGN for o in flat)


def fingerprint(inputs: Inputs) -> Fingerprint:
    """Shapes, dtypes and float64 sums that move when any value or its position changes (one sync). The
    float64 work goes in chunks (compare.CHUNK elements), so a 6 GiB input costs no 13 GiB copy."""
    import torch

    chunk = compare.CHUNK  # read at each call: tests shrink it
    parts: Fingerprint = []
    sums: list[torch.Tensor] = []
    for x in inputs:
        if not isinstance(x, torch.Tensor):
            parts.append(repr(x))
            continue
        parts.append((tuple(x.shape), str(x.dtype), str(x.device)))
        flat = (torch.view_as_real(x) if x.is_complex() else x).detach().reshape(-1)
        n = flat.numel() - flat.numel() % 64
        total = torch.zeros((), dtype=torch.float64, device=flat.device)
        weighted = torch.zeros((), dtype=torch.float64, device=flat.device)
        lanes = torch.zeros(64, dtype=torch.float64, device=flat.device)
        step = chunk - chunk % 64
        for a in range(0, n, step):
            rows = torch.nan_to_num(flat[a:min(a + step, n)].double()).view(-1, 64)
            row_sums = rows.sum(1)
            first = a // 64 + 1
            weights = torch.arange(first, first + rows.shape[0], dtype=torch.float64, device=flat.device)
            total += row_sums.sum()
            lanes += rows.sum(0)
            weighted += (row_sums * weights).sum()
        tail = torch.nan_to_num(flat[n:].double())
        total += tail.sum()
        tail_w = (tail * torch.arange(1, tail.numel() + 1, dtype=torch.float64, device=flat.device)).sum()
        sums.append(torch.cat([total.view(1), lanes, weighted.view(1), tail_w.view(1)]))
    if sums:
        parts.append(torch.cat(sums).tolist())
    return parts


def model_print(*models: torch.nn.Module | None) -> tuple[object, ...]:
    """Names, shapes, dtypes and float64 sums of the models' parameters and buffers."""
    import torch

    names: list[object] = []
    sums: list[torch.Tensor] = []
    for m in models:
        if m is None:
            names.append(None)
            continue
        for name, t in m.state_dict(keep_vars=False).items():
            names.append((name, tuple(t.shape), str(t.dtype)))
            if t.numel():
                sums.append(torch.nan_to_num(t.detach().double().sum()).view(1))
    return tuple(names) + (tuple(torch.cat(sums).tolist()) if sums else (),)


class ReferenceCache:
    """The entries of one problem (on its ProblemState), least recently used first."""

    STORE_FROM_VERDICT = 2  # the problem's verdict from which entries are proved and stored (docstring)

    def __init__(self, device: str) -> None:
        self.device = device
        self.entries: OrderedDict[tuple[object, ...], Entry] = OrderedDict()
        self.bytes = 0
        self.disabled = ""  # why the cache is off for this problem (a verdict note)
        self.stored = self.refused = 0
        self.verdicts = 0  # verifications of this problem so far (context() is asked once per verify)

    # ---- keys ---------------------------------------------------------------------------------
    def context(self, ref: Reference, tol: Tolerance) -> tuple[object, ...]:
        """The key's part that holds for one verdict: weights, global state, dtype, device, tolerance."""
        self.verdicts += 1
        if self.entries:  # a budget that shrank since the entries were stored (less free memory) is kept to
            budget = self.budget()
            while self.entries and self.bytes > budget:
                self.bytes -= self.entries.popitem(last=False)[1].nbytes
        return (self.device, model_print(ref.model, ref.model64), global_state.Snapshot.take(),
                (tol.atol, tol.rtol, tol.max_normalized))

    @staticmethod
    def key(context: tuple[object, ...], trial_seed: int, dist: str, spec: ShapeSet | None,
            has64: bool) -> tuple[object, ...]:
        return (context, trial_seed, dist, json.dumps(spec, sort_keys=True, default=repr), has64)

    # ---- budget -------------------------------------------------------------------------------
    def budget(self) -> int:
        cap = os.environ.get(ENV, "").strip()
        fixed = int(cap) if cap.isdigit() else None
        if self.device.startswith("cuda"):
            import torch

            free, _total = torch.cuda.mem_get_info(torch.device(self.device))
            room = int(FREE_FRACTION * (free + self.bytes))
        else:
            room = CPU_BYTES
        return room if fixed is None else min(room, fixed)

    def fits(self, key: tuple[object, ...], out_ref: object, out64: object) -> bool:
        """Whether an entry for these outputs could be stored beside this context's entries (checked before the
        second computation)."""
        ref, ref64 = _tensors(out_ref), _tensors(out64)
        if self.disabled or ref is None or ref64 is None:
            return False
        need = _sizes(ref) + (0 if out64 is out_ref else _sizes(ref64))
        if need > self.budget() - self._held(key):
            self.refused += 1
            return False
        return True

    def _held(self, key: tuple[object, ...]) -> int:
        """The bytes of the entries of ``key``'s context, other than ``key``'s own (those are never evicted to
        make room for another of the same context)."""
        return sum(e.nbytes for k, e in self.entries.items() if k[0] == key[0] and k != key)

    def _evict(self, key: tuple[object, ...], need: int, budget: int) -> bool:
        """Room for ``need`` bytes under ``key``: ``key``'s old entry goes, then entries of other contexts, least
        recently used first and only as many as the room needs (this context's stay: see the module's docstring).
        Whether it fits; when it cannot, the other contexts' entries are kept."""
        if key in self.entries:
            self.bytes -= self.entries.pop(key).nbytes
        others = [k for k in self.entries if k[0] != key[0]]  # least recently used first
        if self.bytes - sum(self.entries[k].nbytes for k in others) + need > budget:
            return False
        for k in others:
            if self.bytes + need <= budget:
                break
            self.bytes -= self.entries.pop(k).nbytes
        return True

    # ---- entries ------------------------------------------------------------------------------
    def lookup(self, key: tuple[object, ...], inputs_print: Fingerprint
               ) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
        """The cached (dtype outputs, float64 outputs) as views of the packed buffer, or None."""
        entry = None if self.disabled else self.entries.get(key)
        if entry is None:
            return None
        if entry.inputs_print != inputs_print:
            self.disable("the problem's get_inputs gives other values from the same seed")
            return None
        self.entries.move_to_end(key)
        views = [entry.packed[off:off + n].view(dtype).view(shape) for off, n, shape, dtype in entry.layout]
        return views[:entry.n_ref], (views[entry.n_ref:] or views[:entry.n_ref])

    def store(self, key: tuple[object, ...], inputs_print: Fingerprint, out_ref: object, out64: object) -> bool:
        import torch

        ref, ref64 = _tensors(out_ref), _tensors(out64)
        if self.disabled or ref is None or ref64 is None:
            return False
        flat = ref + ([] if out64 is out_ref else ref64)
        need = _sizes(flat)
        if not self._evict(key, need, self.budget()):
            self.refused += 1
            return False
        packed = torch.empty(need, dtype=torch.uint8, device=flat[0].device)
        layout, off = [], 0
        for o in flat:
            n = o.numel() * o.element_size()
            packed[off:off + n].copy_(o.detach().contiguous().reshape(-1).view(torch.uint8))
            layout.append((off, n, tuple(o.shape), o.dtype))
            off += -(-n // ALIGN) * ALIGN
        self.entries[key] = Entry(packed, layout, len(ref), inputs_print, need)
        self.bytes += need
        self.stored += 1
        return True

    def disable(self, why: str) -> None:
        self.disabled = self.disabled or why
        self.clear()

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0


class TrialReference:
    """One trial's reference outputs: from the cache when it holds them, computed otherwise (and stored
    when a second computation agrees bitwise). ``before_candidate`` for reference-first trials,
    ``outputs`` after the candidate call in both orders."""

    def __init__(self, cache: ReferenceCache | None, context: tuple[object, ...] | None, ref: Reference,
                 pristine: Inputs, device: str, trial: Trial,
                 compute: Callable[[Reference, Inputs, str], tuple[Outputs, Outputs]]) -> None:
        self.cache, self.context, self.ref, self.pristine, self.device = cache, context, ref, pristine, device
        self.trial, self.compute = trial, compute
        self.fresh: Outputs = None  # the dtype output called before the candidate (reference-first hit)
        self.computed: tuple[Outputs, Outputs] | None = None
        self.print: Fingerprint | None = None
        self.cached = False

    def _key(self) -> tuple[object, ...]:
        assert self.context is not None
        return ReferenceCache.key(self.context, *self.trial, self.ref.model64 is not None)

    def _lookup(self) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
        if self.cache is None or self.context is None or self.cache.disabled:
            return None
        key = self._key()
        if key not in self.cache.entries:
            return None  # nothing kept for this trial (a problem's first verdict, or no room): no fingerprint to take
        if self.print is None:  # once per trial: a reference-first trial looks up before and after the candidate
            self.print = fingerprint(self.pristine)
        return self.cache.lookup(key, self.print)

    def before_candidate(self) -> None:
        if self._lookup() is not None:  # the state the reference leaves, as without the cache
            self.fresh = run_model(self.ref.model, clone_inputs(self.pristine), self.device)
        else:
            self.computed = self.compute(self.ref, self.pristine, self.device)

    def outputs(self) -> tuple[Outputs, Outputs]:
        hit = self._lookup() if self.computed is None else None
        if hit is not None:
            out_ref, out64 = hit
            if self.fresh is None:
                self.cached = True
                return out_ref, out64
            fresh = _tensors(self.fresh)
            if fresh is not None and len(fresh) == len(out_ref) and all(map(bitwise_equal, fresh, out_ref)):
                self.cached = True
                return self.fresh, out64
            assert self.cache is not None
            self.cache.disable("two reference runs on the same inputs differed bitwise")
            return self.compute(self.ref, self.pristine, self.device)
        if self.computed is None:
            self.computed = self.compute(self.ref, self.pristine, self.device)
        out_ref, out64 = self.computed
        self._verify_and_store(out_ref, out64)
        return out_ref, out64

    def _verify_and_store(self, out_ref: object, out64: object) -> None:
        cache = self.cache
        # a problem's first verdict stores nothing: most problems are judged once (a suite's one candidate
        # each), and the second computation that proves a reference repeatable would only cost them time;
        # from the second verdict on (an edit of the same problem) entries are proved and kept
        if cache is None or self.context is None or cache.verdicts < cache.STORE_FROM_VERDICT \
                or not cache.fits(self._key(), out_ref, out64):
            return
        has64 = self.ref.model64 is not None
        again_ref, again64 = self.compute(self.ref, self.pristine, self.device)
        if (self.ref.model64 is not None) != has64:
            return  # the float64 copy failed on the second computation: nothing settled to keep
        pairs = [(_tensors(out_ref), _tensors(again_ref))] + ([] if out64 is out_ref else
                                                               [(_tensors(out64), _tensors(again64))])
        for a, b in pairs:
            if a is None or b is None or len(a) != len(b) or not all(map(bitwise_equal, a, b)):
                cache.disable("two reference runs on the same inputs differed bitwise")
                return
        del again_ref, again64
        if self.print is None:
            self.print = fingerprint(self.pristine)
        cache.store(self._key(), self.print, out_ref, out64)
