"""What a candidate declares about itself (``KERNELPILOT_LIBRARIES``, ``KERNELPILOT_ORIGIN``), as the engine applies it.

A candidate converted from torch.compile's output (kernelpilot.inductor) keeps Inductor's library calls
(cuBLAS matmuls, cuDNN convolutions): it declares them, the engine allows them for this candidate only,
and the verdict lists each one as a ``library-call`` finding (warn), so the engineer sees them. It also
declares ``KERNELPILOT_ORIGIN = "inductor"``: its time should be torch.compile's, and the verdict flags
a time not within 5% of it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernelpilot.evaluation.candidate import (
    LIBRARY_DECLARATION,
    ORIGIN_DECLARATION,
    Candidate,
    declarations,
)
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.verdict import Finding, Performance, Verdict

INDUCTOR_TOLERANCE = 0.05
_KNOWN_LIBRARIES = ("cublas", "cudnn", "attention")


def declared_settings(candidate: Candidate, settings: EvalSettings,
                      verdict: Verdict) -> tuple[EvalSettings, dict[str, Any]]:
    """The request settings with the candidate's declared libraries allowed, and its declarations.
    Adds a ``library-call`` finding per declared library to ``verdict``."""

    try:
        declared = declarations(candidate) if hasattr(candidate, "model_file") else {}
    except Exception:  # noqa: BLE001 - an unparsable file was already reported by the policy
        declared = {}
    libraries = declared.get(LIBRARY_DECLARATION) or ()
    if isinstance(libraries, str):
        libraries = (libraries,)
    # an ATen operator torch.compile leaves to eager between its graphs (level2/28's instance_norm): allowed
    # by name, and only for a candidate converted from torch.compile's own run, whose time is checked
    # against torch.compile's; any other candidate may declare libraries only
    inductor = declared.get(ORIGIN_DECLARATION) == "inductor"
    libraries = [str(lib).lower() for lib in libraries
                 if str(lib).lower() in _KNOWN_LIBRARIES or (inductor and _is_aten_op(str(lib)))]
    if not libraries:
        return settings, declared
    settings = replace(settings, allowed_libraries=list(settings.allowed_libraries) + [
        lib for lib in libraries if lib not in settings.allowed_libraries])
    for lib in libraries:
        what = "the PyTorch operator" if _is_aten_op(lib) else ""
        verdict.findings.append(Finding(
            rule="library-call", severity="warn", evidence=lib,
            message=f"the candidate calls {what + ' ' if what else ''}{lib} (declared in {LIBRARY_DECLARATION}, as "
                    "torch.compile does); it is allowed for this candidate only and that part of the time is "
                    f"{'PyTorch' if what else 'the library'}'s, not a kernel of its own."))
    return settings, declared


def _is_aten_op(name: str) -> bool:
    parts = name.strip().lower().split(".")
    return len(parts) == 2 and parts[0] == "aten" and parts[1].replace("_", "").isalnum()


def runs_torch_compile_libraries(declared: dict[str, Any], settings: EvalSettings) -> bool:
    """An Inductor-origin candidate whose declared libraries are allowed: when it compiles no kernel of its own
    (torch.compile's run of a matmul, a convolution or an attention is the library call alone), "no kernel of
    its own" is what torch.compile does too, so it is said (no-kernel, warn) rather than refused. The same holds
    for an ATen operator Inductor falls back to (level1/46's avg_pool3d: its c0 is that one call)."""
    allowed = {str(lib).lower() for lib in settings.allowed_libraries or []}
    return declared.get(ORIGIN_DECLARATION) == "inductor" and any(
        lib in _KNOWN_LIBRARIES or _is_aten_op(lib) for lib in allowed)


def within_compile_flag(declared: dict[str, Any], performance: Performance | None) -> list[str]:
    """A flag when an Inductor-origin candidate's time is not within 5% of torch.compile's."""
    if declared.get(ORIGIN_DECLARATION) != "inductor" or performance is None:
        return []
    cand, comp = performance.candidate, performance.compiled
    if cand is None or comp is None or not comp.median_ms:
        return ["inductor candidate: no torch.compile time to compare with (the within-5% check did not run)"]
    ratio = cand.median_ms / comp.median_ms
    if abs(ratio - 1) <= INDUCTOR_TOLERANCE:
        return []
    return [f"inductor candidate: {cand.median_ms:.4g} ms vs torch.compile {comp.median_ms:.4g} ms "
            f"({(ratio - 1) * 100:+.1f}%), "
            "not within 5%: the launch configs or the library call differ from what torch.compile ran"]
