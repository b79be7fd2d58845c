"""A verdict as short text for the model: the engine's renderer, and a brief fallback if it fails."""

from __future__ import annotations

from typing import Any

from kernelpilot.approval_rule import shown_status
from kernelpilot.verdict import ABOVE_ROOFLINE, SpeedOfLight, Verdict


def verdict_for_model(verdict: Verdict) -> str:
    """The engine's rendering (``brief`` if the renderer fails on this verdict)."""
    # imported here: the engine's package loads when the first verdict is rendered, not with the UI or the CLI
    from kernelpilot.evaluation.render import for_model

    try:
        return str(for_model(verdict))
    except Exception:  # noqa: BLE001 - never lose a verdict to a renderer bug
        return brief(verdict)


def resources(verdict: Verdict) -> str:
    """ptxas figures per kernel (registers, shared memory, spills), one line each."""
    b = verdict.build
    if b is None or not b.kernels:
        return ""
    lines = []
    for k in b.kernels[:8]:
        spills = (k.spill_stores_bytes or 0) + (k.spill_loads_bytes or 0)
        lines.append(f"  kernel {k.kernel} ({k.arch or '?'}): {k.registers} regs, {k.shared_bytes or 0} B smem, "
                     f"{k.stack_frame_bytes or 0} B stack, spills {spills} B")
    return "ptxas:\n" + "\n".join(lines)


def build_for_model(verdict: Verdict) -> str:
    """The build tool's answer: the verdict text plus registers and spills per kernel."""
    text = verdict_for_model(verdict)
    extra = resources(verdict)
    if extra and " regs" not in text:
        text += "\n" + extra
    b = verdict.build
    if b is not None and not b.ok and not b.diagnostics and b.log_tail:
        text += "\nlog tail:\n" + "\n".join(b.log_tail.strip().splitlines()[-20:])
    return text


def _ms(value: Any) -> str:
    return f"{value:.4g} ms" if isinstance(value, (int, float)) else "n/a"


def brief(v: Verdict) -> str:
    lines = [f"status: {v.status}" + (f" — {v.summary}" if v.summary else "")]
    if v.error:
        lines.append(f"error: {v.error.strip()[:1500]}")
    b = v.build
    if b is not None:
        lines.append(f"build: {'ok' if b.ok else 'FAILED'} in {b.seconds:.1f} s")
        errors = [d for d in b.diagnostics if d.severity == "error"]
        others = [d for d in b.diagnostics if d.severity != "error"]
        for d in (errors + others)[:15]:
            where = f"{d.file}:{d.line}" if d.file and d.line else (d.file or "")
            lines.append(f"  {d.severity} {where} {d.message}".rstrip())
        if len(b.diagnostics) > 15:
            lines.append(f"  … {len(b.diagnostics) - 15} more diagnostics")
        if not b.ok and not b.diagnostics and b.log_tail:
            lines.append("  log tail:\n" + "\n".join("    " + ln for ln in b.log_tail.strip().splitlines()[-20:]))
        for k in b.kernels[:8]:
            spills = (k.spill_stores_bytes or 0) + (k.spill_loads_bytes or 0)
            lines.append(f"  kernel {k.kernel}: {k.registers} regs, {k.shared_bytes or 0} B smem, spills {spills} B")
    c = v.correctness
    if c is not None:
        lines.append(f"correctness: {'passed' if c.passed else 'FAILED'} "
                     f"({sum(t.passed for t in c.trials)}/{len(c.trials)} trials)")
        for t in [t for t in c.trials if not t.passed][:3]:
            lines.append(f"  trial seed={t.seed} {t.distribution} {t.order}: max_abs={t.max_abs_error} "
                         f"mismatched {t.mismatched}/{t.total} {t.message}".rstrip())
        for note in c.notes[:5]:
            lines.append(f"  note: {note}")
    for f in v.findings[:10]:
        where = f" {f.file}:{f.line}" if f.file else ""
        lines.append(f"finding [{f.severity}] {f.rule}{where}: {f.message}")
    p = v.performance
    if p is not None and p.candidate is not None:
        lines.append(f"time: candidate {_ms(p.candidate.median_ms)} (IQR {p.candidate.iqr_ms:.3g}), "
                     f"eager {_ms(p.eager.median_ms if p.eager else None)}, "
                     f"torch.compile {_ms(p.compiled.median_ms if p.compiled else None)}")
        sve = f"{p.speedup_vs_eager:.3g}x" if p.speedup_vs_eager else "n/a"
        svc = f"{p.speedup_vs_compile:.3g}x" if p.speedup_vs_compile else "n/a"
        lines.append(f"speedup: {sve} vs eager, {svc} vs torch.compile; tier {p.tier}"
                     + (f"; noise {p.noise_pct:.2g}%" if p.noise_pct is not None else ""))
    s = v.speed_of_light
    if s is not None and (s.floor_ms or s.pct_of_ceiling):
        pct = f"{s.pct_of_ceiling:.1f}%" if s.pct_of_ceiling is not None else "n/a"
        lines.append(f"speed of light: {s.bound}-bound, floor {_ms(s.floor_ms)}, candidate at {pct} of ceiling"
                     + (f" ({s.ceiling_source})" if s.ceiling_source else "")
                     + (f"; {ABOVE_ROOFLINE}" if s.above_roofline() else ""))
    for flag in v.flags[:5]:
        lines.append(f"flag: {flag}")
    return "\n".join(lines)


def one_line(data: dict[str, Any]) -> str:
    """A one-line summary of a verdict dict, for the pinned 'best so far' note and logs."""
    perf = data.get("performance") or {}
    cand = (perf.get("candidate") or {}).get("median_ms")
    svc = perf.get("speedup_vs_compile")
    parts = [shown_status(data) if data.get("status") else "?"]  # a build-only ok verdict is "built"
    if isinstance(cand, (int, float)):
        parts.append(f"{cand:.4g} ms")
    if isinstance(svc, (int, float)):
        parts.append(f"{svc:.3g}x vs torch.compile")
    sol = (data.get("speed_of_light") or {}).get("pct_of_ceiling")
    if isinstance(sol, (int, float)):
        parts.append(SpeedOfLight(pct_of_ceiling=float(sol)).pct_words())
    if data.get("summary"):
        parts.append(str(data["summary"]))
    return ", ".join(parts)
