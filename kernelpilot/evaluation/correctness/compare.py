"""Comparing a candidate's output with the references, in bounded memory (worker side; torch imported lazily).

The rule (verify.py's docstring has the reasons): every element within atol + rtol*|ref| of the
problem-dtype reference, or of the float64 truth widened by twice the dtype reference's own worst
error, AND ||out - ref64|| / ||ref64|| within max(threshold, 2 x the dtype reference's own normalised
error). Non-finite truth must be matched exactly by one of the references.

The comparison runs over flat chunks of at most ``CHUNK`` elements, so its float64 temporaries stay
a few hundred MB however large the output: a 4096 x 393216 output (1.6e9 elements) compared in one
piece needs a dozen float64 copies of itself, over 100 GB. Two passes: the first finds the dtype
reference's worst error (the slack), the second checks and accumulates the norms and maxima.
``out`` may also be a Python number: the constant output the trivial-output guard puts through the
same check, without materialising it. CUDA outputs of float dtypes take the same two passes as fused
Triton kernels (compare_kernel.py: each element read once per pass, one host sync), with the same
element test bit for bit; KERNELPILOT_FUSED_COMPARE=0 keeps the torch path everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

CHUNK = 1 << 24  # elements per chunk: 16M, so each float64 temporary is 128 MiB

# What a forward returns: a tensor, or tuples and lists of them (nested). A candidate's forward may return
# anything at all (a tensor subclass, a number, None): the checks look at what came back and say what is
# wrong with it, so a whole output is arbitrary by nature. The functions that only inspect an output take
# ``object``; this alias marks the few that read a reference's outputs as tensors.
Outputs = Any


@dataclass
class Tolerance:
    atol: float
    rtol: float
    max_normalized: float


def dtype_name(dtype: torch.dtype | str) -> str:
    return str(dtype).replace("torch.", "")


def flatten_outputs(out: object) -> list[Any]:
    if isinstance(out, (tuple, list)):
        flat: list[Any] = []
        for o in out:
            flat.extend(flatten_outputs(o))
        return flat
    return [out]


def _chunks(n: int) -> list[tuple[int, int]]:
    return [(i, min(i + CHUNK, n)) for i in range(0, n, CHUNK)] or [(0, 0)]


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1)


def _header(out: object, ref: torch.Tensor) -> str:
    """Why ``out`` cannot be compared with ``ref`` at all ("" when it can)."""
    import torch

    if isinstance(out, (int, float)):
        return ""
    if type(out) is not torch.Tensor:
        return f"output is a {type(out).__module__}.{type(out).__qualname__}, not a plain torch.Tensor"
    if tuple(out.shape) != tuple(ref.shape):
        return f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"output dtype {dtype_name(out.dtype)} != expected {dtype_name(ref.dtype)}"
    if out.device != ref.device:
        return f"output on {out.device}, expected {ref.device}"
    return ""


def _torch_passes(out: torch.Tensor | None, ref: torch.Tensor, ref64: torch.Tensor, tol: Tolerance, floor: float,
                  value: float) -> dict[str, float]:
    """The two passes in chunks of torch operations (any device and dtype); ``out`` None: the constant ``value``."""
    import torch

    total = ref.numel()
    r_all, t_all = _flat(ref), _flat(ref64)
    o_all = None if out is None else _flat(out)
    floating = ref.is_floating_point()
    # pass 1: the dtype reference's worst error against the truth (the slack of the truth test)
    slack = 0.0
    if total and ref.dtype != torch.float64:
        worst = 0.0
        for a, b in _chunks(total):
            r, t = r_all[a:b].double(), t_all[a:b].double()
            finite = torch.isfinite(t) & torch.isfinite(r)
            if floating:
                finite &= torch.isfinite(t_all[a:b].to(ref.dtype).double())
            gap = torch.where(finite, (r - t).abs(), torch.zeros_like(t))
            worst = max(worst, float(gap.max()) if gap.numel() else 0.0)
        slack = 2.0 * worst
    # pass 2: the element test, the norms and the maxima
    mismatched = unwritten = 0
    err_sq = ref_sq = ref_err_sq = 0.0
    max_abs = max_rel = 0.0
    for a, b in _chunks(total):
        r, t = r_all[a:b].double(), t_all[a:b].double()
        o = torch.full_like(r, value) if o_all is None else o_all[a:b].double()
        tq = t_all[a:b].to(ref.dtype).double() if floating else t
        finite = torch.isfinite(t) & torch.isfinite(tq)
        # where the truth overflows / is NaN in this dtype, the output must match one reference exactly
        nonfin_ok = (o == tq) | (o == r) | (torch.isnan(o) & (torch.isnan(tq) | torch.isnan(r)))
        ok_dtype = (o - r).abs() <= tol.atol + tol.rtol * r.abs()
        ok_true = (o - t).abs() <= tol.atol + slack + tol.rtol * t.abs()
        ok = torch.where(finite, ok_dtype | ok_true, nonfin_ok)
        mismatched += int((~ok).sum())
        unwritten += int((torch.isnan(o) & finite).sum())
        err = torch.where(finite, (o - t).abs(), torch.zeros_like(t))
        tf = torch.where(finite, t, torch.zeros_like(t))
        seen = torch.where(torch.isnan(err), torch.zeros_like(err), err)  # NaN output: counted as unwritten
        rf = torch.where(finite & torch.isfinite(r), r, tf)
        if err.numel():
            err_sq += float((err * err).sum())
            ref_sq += float((tf * tf).sum())
            diff = rf - tf
            ref_err_sq += float((diff * diff).sum())
            max_abs = max(max_abs, float(seen.max()))
            max_rel = max(max_rel, float((seen / tf.abs().clamp_min(floor)).max()))
        del r, t, o, tq, finite, nonfin_ok, ok_dtype, ok_true, ok, err, seen, tf, rf
    return {"slack": slack, "err_sq": err_sq, "ref_sq": ref_sq, "ref_err_sq": ref_err_sq, "max_abs": max_abs,
            "max_rel": max_rel, "mismatched": mismatched, "unwritten": unwritten}


_FUSED_OFF = ("0", "off", "no", "false")
_fused_failure: list[str] = []  # why the fused kernels could not run in this process (then: the torch path)


def _fused_off() -> bool:
    """The torch path everywhere: KERNELPILOT_FUSED_COMPARE=0, or the fused kernels failed here once."""
    import os

    return bool(_fused_failure) or os.environ.get("KERNELPILOT_FUSED_COMPARE", "1").strip().lower() in _FUSED_OFF


def _fused_compare(out: torch.Tensor | None, ref: torch.Tensor, ref64: torch.Tensor, tol: Tolerance, floor: float,
                   value: float) -> dict[str, float] | None:
    """The two passes as fused Triton kernels (compare_kernel.py) for CUDA float tensors; None: use the torch
    path (another device or dtype, KERNELPILOT_FUSED_COMPARE=0, or Triton failed here once)."""
    if _fused_off():
        return None
    if not getattr(ref, "is_cuda", False):
        return None
    try:
        from kernelpilot.evaluation.correctness import fused_compare as compare_kernel

        if not compare_kernel.usable(value if out is None else out, ref, ref64):
            return None
        r, t = _flat(ref), _flat(ref64)
        o = None if out is None else _flat(out)
        return compare_kernel.check(o, r, t, tol.atol, tol.rtol, floor, value)
    except Exception as exc:  # the torch path gives the same verdict, only slower
        import sys

        _fused_failure.append(f"{type(exc).__name__}: {exc}")
        print(f"kernelpilot: the fused comparison is unavailable ({_fused_failure[0][:300]}); "
              "comparing with torch operations", file=sys.stderr)
        return None


def warm_comparison(dtype: torch.dtype, device: str) -> None:
    """The fused comparison's kernels for ``dtype`` compiled ahead (fused_compare.warm); a failure here is left for
    the comparison itself, which then takes the torch path and says so."""
    if _fused_off():
        return
    try:
        from kernelpilot.evaluation.correctness import fused_compare as compare_kernel

        compare_kernel.warm(dtype, device)
    except Exception:  # noqa: BLE001 - see the docstring
        return


def _fused_replay(cand: torch.Tensor, eager: torch.Tensor, atol: float, rtol: float) -> list[float] | None:
    """replay_difference's sums in one fused pass (compare_kernel.replay_sums); None: the torch path."""
    if _fused_off():
        return None
    if not getattr(eager, "is_cuda", False):
        return None
    try:
        from kernelpilot.evaluation.correctness import fused_compare as compare_kernel

        return compare_kernel.replay_sums(cand, eager, atol, rtol)
    except Exception as exc:  # the torch path gives the same answer, only slower
        _fused_failure.append(f"{type(exc).__name__}: {exc}")
        return None


def compare(out: object, ref: torch.Tensor, ref64: torch.Tensor, tol: Tolerance) -> dict[str, Any]:
    """Compare one output tensor (or a constant; or whatever else a candidate returned, which fails with the
    reason); returns the fields of a TrialResult plus ``unwritten``."""
    import torch

    res: dict[str, Any] = {"passed": False, "mismatched": 0, "total": 0, "unwritten": 0, "message": ""}
    problem = _header(out, ref)
    if problem:
        res["message"] = problem
        return res
    constant = isinstance(out, (int, float))
    value = float(out) if constant else 0.0
    if constant and ref.is_floating_point():
        value = float(torch.tensor(value, dtype=torch.float64).to(ref.dtype))  # what a kernel could write
    total = ref.numel()
    res["total"] = total
    floor = max(tol.atol, 1e-30)
    cand = None if constant else out
    passes = _fused_compare(cand, ref, ref64, tol, floor, value) or _torch_passes(cand, ref, ref64, tol, floor, value)
    slack, mismatched, unwritten = passes["slack"], passes["mismatched"], passes["unwritten"]
    err_sq, ref_sq, ref_err_sq = passes["err_sq"], passes["ref_sq"], passes["ref_err_sq"]
    max_abs, max_rel = passes["max_abs"], passes["max_rel"]
    ref_norm, err_norm, ref_err_norm = math.sqrt(ref_sq), math.sqrt(err_sq), math.sqrt(ref_err_sq)
    if ref_norm > 0:
        normalized, ref_normalized = err_norm / ref_norm, ref_err_norm / ref_norm
        threshold = max(tol.max_normalized, 2.0 * ref_normalized)
    else:  # all-zero truth: fall back to the absolute error
        normalized, ref_normalized = err_norm, ref_err_norm
        threshold = max(tol.atol, 2.0 * ref_normalized)
    if unwritten or math.isnan(normalized):
        normalized = float("inf")
    res.update(max_abs_error=max_abs, max_rel_error=max_rel, normalized_error=normalized,
               reference_normalized_error=ref_normalized, mismatched=mismatched, unwritten=unwritten,
               threshold=threshold)
    res["passed"] = mismatched == 0 and normalized <= threshold
    if unwritten:
        res["message"] = f"{unwritten} of {total} output elements were never written (NaN poison left)"
    elif mismatched:
        res["message"] = (f"{mismatched} of {total} elements outside atol={tol.atol:g} rtol={tol.rtol:g}"
                          + (f" (+{slack:.3g}: twice the dtype reference's worst error)" if slack > tol.atol else ""))
    elif not res["passed"]:
        res["message"] = f"normalised error {normalized:.3g} > threshold {threshold:.3g}"
    return res


def compare_all(outs: object, refs: Outputs, refs64: Outputs, tol: Tolerance) -> dict[str, Any]:
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


def trivial_outputs(refs: Outputs, previous: list[torch.Tensor | None] | None = None
                    ) -> tuple[list[float], list[float] | None]:
    """A zero output and a constant output for each reference output, as numbers (compare takes them).

    The constant is the mean of the reference, except for single-element outputs (a mean loss), where
    that mean *is* the reference: there the constant is the previous trial's value (what a hard-coded
    result would return), and None on the first trial.
    """
    import torch

    outs = flatten_outputs(refs)
    prev = list(previous or [])  # single-element outputs of the previous trial (None for the others)
    sources = [r if r.numel() > 1 else (prev[i] if i < len(prev) else None) for i, r in enumerate(outs)]
    zeros: list[float] = [0.0 for _ in outs]
    if any(src is None for src in sources):
        return zeros, None

    def mean(src: torch.Tensor) -> float:  # over the finite elements; accumulated on the device, one host sync
        flat = _flat(src)
        total = torch.zeros((), dtype=torch.float64, device=flat.device)
        count = torch.zeros((), dtype=torch.int64, device=flat.device)
        for a, b in _chunks(flat.numel()):
            d = flat[a:b].double()
            finite = torch.isfinite(d)
            total += torch.where(finite, d, torch.zeros_like(d)).sum()
            count += finite.sum()
        n = int(count)
        return float(total) / n if n else 0.0

    return zeros, [mean(src) for src in sources]


def replay_difference(cand: torch.Tensor, eager: torch.Tensor, atol: float = 0.0, rtol: float = 0.0
                      ) -> tuple[float, int]:
    """(||cand - eager|| / ||eager||, the count of elements with |cand - eager| > atol + rtol*|eager|), over
    the elements where eager is finite (chunked, one host sync); the error is inf for NaN where eager has
    none. The timing phase's check of a timed output against eager on the same inputs: the count is what
    tells a stale result from a near-zero output (a mean after a norm), whose normalised error is large
    however close each element is."""
    import torch

    c_all, e_all = _flat(cand), _flat(eager)
    # diff^2, eager^2, NaN where eager is finite, elements outside the band
    fused = _fused_replay(c_all, e_all, atol, rtol)
    if fused is None:
        sums = torch.zeros(4, dtype=torch.float64, device=e_all.device)
        for a, b in _chunks(e_all.numel()):
            c, e = c_all[a:b].double(), e_all[a:b].double()
            fin = torch.isfinite(e)
            d = torch.where(fin, c - e, torch.zeros_like(e))
            ef = torch.where(fin, e, torch.zeros_like(e))
            outside = fin & ~(d.abs() <= atol + rtol * ef.abs())  # NaN in cand counts as outside
            sums += torch.stack([(d * d).sum(), (ef * ef).sum(), (torch.isnan(c) & fin).sum().double(),
                                 outside.sum().double()])
        fused = sums.tolist()
    diff_sq, norm_sq, holes, outside_n = fused
    if holes:
        return float("inf"), int(outside_n)
    return (math.sqrt(diff_sq / norm_sq) if norm_sq > 0 else math.sqrt(diff_sq)), int(outside_n)


def normalized_difference(cand: torch.Tensor, eager: torch.Tensor) -> float:
    """||cand - eager|| / ||eager|| over the elements where eager is finite (chunked); inf for NaN where
    eager has none."""
    return replay_difference(cand, eager)[0]
