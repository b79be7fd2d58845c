"""Verdicts in words: table cells for the candidates table and the full review text."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from kernelpilot.verdict import ABOVE_ROOFLINE, Timing, Verdict

STATUS_WORDS = {
    "ok": "ok",
    "build_error": "build error",
    "runtime_error": "runtime error",
    "timeout": "timed out",
    "incorrect": "incorrect",
    "rejected": "rejected by audit",
    "superseded": "superseded",  # a newer save cancelled it: not a verdict about the candidate, not a failure
}
STATUS_STYLE = {
    "ok": "green",
    "build_error": "red",
    "runtime_error": "red",
    "timeout": "red",
    "incorrect": "red",
    "rejected": "magenta",
    "superseded": "dim",
}
TIER_WORDS = {
    "incorrect": "not correct",
    "correct": "correct, not faster than eager",
    "faster_than_eager": "correct and faster than eager PyTorch",
    "faster_than_compile": "correct and faster than torch.compile",
}


BUILD_ONLY_NOTE = "correctness and timing need a GPU"


def build_only(v: Verdict) -> bool:
    """Built and nothing more was asked (no GPU, or ``--mode build``): neither ok nor a failure."""
    return v.status == "ok" and v.mode == "build"


def status_word(v: Verdict) -> str:
    return "built" if build_only(v) else STATUS_WORDS.get(v.status, v.status)


def status_style(v: Verdict) -> str:
    return "cyan" if build_only(v) else STATUS_STYLE.get(v.status, "")


def build_summary(v: Verdict) -> str:
    """'built in 3.1 s; softmax_kernel: 40 registers, no spills' (kernels from the build report)."""
    parts = [v.summary or "built"]
    for k in (v.build.kernels if v.build else [])[:2]:
        spill = (k.spill_stores_bytes or 0) + (k.spill_loads_bytes or 0)
        regs = f"{k.registers} registers" if k.registers is not None else "registers unknown"
        parts.append(f"{k.kernel}: {regs}, {'no spills' if not spill else f'{spill} B spilled'}")
    warnings = sum(1 for d in (v.build.diagnostics if v.build else []) if d.severity == "warning")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings > 1 else ''}")
    return "; ".join(parts)


def verdict_of(data: dict[str, Any] | Verdict) -> Verdict:
    return data if isinstance(data, Verdict) else Verdict.from_dict(data)


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def _ms(t: Timing | None) -> str:
    if t is None:
        return "—"
    return f"{t.median_ms:.3f} ms"


def correctness_cell(v: Verdict) -> str:
    c = v.correctness
    if c is None or not c.trials:
        return "—" if c is None else ("pass" if c.passed else "fail")
    passed = sum(1 for t in c.trials if t.passed)
    return f"{'pass' if c.passed else 'fail'} {passed}/{len(c.trials)}"


def row_cells(candidate_id: str, v: Verdict, source: str = "agent") -> tuple[str, ...]:
    p = v.performance
    sol = v.speed_of_light
    pct = sol.pct_of_ceiling if sol is not None else None
    flags = len(v.flags) + sum(1 for f in v.findings if f.severity == "reject")
    ident = candidate_id + (" ✎" if source == "engineer" else "")
    return (
        ident,
        status_word(v),
        correctness_cell(v),
        _ms(p.candidate if p else None),
        _x(p.speedup_vs_eager if p else None),
        _x(p.speedup_vs_compile if p else None),
        "—" if pct is None else f"{pct:.0f}%" + ("!" if sol is not None and sol.above_roofline() else ""),
        "—" if not flags else str(flags),
    )


def speedup(v: Verdict) -> float:
    p = v.performance
    if v.status != "ok" or p is None or p.speedup_vs_eager is None:
        return 0.0
    return float(p.speedup_vs_eager)


def _timing_line(label: str, t: Timing | None) -> str:
    if t is None:
        return f"  {label:<14} not measured"
    host = f", host {t.host_median_ms:.3f} ms" if t.host_median_ms is not None else ""
    if t.launch_median_ms is not None:
        host = f", from idle GPU {t.launch_median_ms:.4f} ms" + host
    return (
        f"  {label:<14} {t.median_ms:.4f} ms median (IQR {t.q1_ms:.4f}–{t.q3_ms:.4f}, "
        f"min {t.min_ms:.4f}, {t.samples} samples{host})"
    )


def _yes_no(value: bool | None, yes: str, no: str) -> str | None:
    if value is None:
        return None
    return yes if value else no


def verdict_text(v: Verdict) -> RenderableType:
    """The whole verdict for the review screen, in plain words."""
    parts: list[RenderableType | None] = [*_head(v), _build_section(v.build), _correctness_section(v.correctness),
                                          _findings_section(v), _timing_section(v.performance),
                                          _speed_of_light_section(v.speed_of_light)]
    if v.flags:
        parts.append(Text("Suspicion flags:\n" + "\n".join(f"  • {f}" for f in v.flags), style="yellow"))
    parts.append(_environment_section(v))
    shown = [part for part in parts if part is not None]
    return Group(*[g for part in shown for g in (part, Text(""))][:-1])


def _head(v: Verdict) -> list[RenderableType]:
    """The status and summary, the error, and whether nothing was run."""
    parts: list[RenderableType] = []
    head = Text()
    head.append(status_word(v).upper(), style=f"bold {status_style(v)}")
    repeats_error = bool(v.error) and v.error.split("\n")[0][:60] in v.summary
    if v.summary and not repeats_error:
        head.append(f"  {v.summary}")
    parts.append(head)
    if v.error:
        parts.append(Text(f"Error: {v.error}", style="red"))
    if build_only(v):
        parts.append(Text(f"Build-only verdict: {BUILD_ONLY_NOTE}; nothing was run or timed.", style="cyan"))
    return parts


def _build_section(b: Any) -> Text | None:
    if b is None:
        return None
    lines = [f"Build: {'ok' if b.ok else 'FAILED'} in {b.seconds:.1f} s"]
    for d in b.diagnostics[:8]:
        where = f"{d.file}:{d.line}: " if d.file and d.line else (f"{d.file}: " if d.file else "")
        lines.append(f"  {d.severity}: {where}{d.message}")
    for k in b.kernels:
        spill = (k.spill_stores_bytes or 0) + (k.spill_loads_bytes or 0)
        lines.append(
            f"  {k.kernel} {k.arch}: {k.registers if k.registers is not None else '?'} registers, "
            f"{k.shared_bytes or 0} B shared, {'no spills' if not spill else f'{spill} B spilled'}"
        )
    if not b.ok and b.log_tail and not b.diagnostics:
        lines.append(b.log_tail.strip()[-800:])
    return Text("\n".join(lines))


def _correctness_section(c: Any) -> Text | None:
    if c is None:
        return None
    passed = sum(1 for t in c.trials if t.passed)
    lines = [
        f"Correctness: {'passed' if c.passed else 'FAILED'} — {passed} of {len(c.trials)} trials"
        + (f" within atol {c.atol:g}, rtol {c.rtol:g}" if c.atol is not None and c.rtol is not None else "")
    ]
    worst = max((t.normalized_error for t in c.trials if t.normalized_error is not None), default=None)
    if worst is not None:
        lines.append(f"  worst normalized error {worst:.2e}"
                     + (f" (limit {c.max_normalized_error:.1e})" if c.max_normalized_error else ""))
    for word in (
        _yes_no(c.deterministic, "deterministic across re-runs", "NOT deterministic across re-runs"),
        _yes_no(c.inputs_unmodified, "inputs left unmodified", "MODIFIES its inputs"),
        _yes_no(c.fully_written, "writes every output element", "leaves output elements unwritten"),
        _yes_no(c.in_bounds, "writes nothing past its tensors' ends", "WRITES PAST A TENSOR'S END"),
        _yes_no(c.discriminates, "the check tells a wrong output apart",
                "a constant output would pass this check"),
    ):
        if word:
            lines.append(f"  {word}")
    if c.outputs_own_storage is False:
        lines.append("  RETURNS AN INPUT'S STORAGE as its output (written in place, or the input handed back)")
    for t in c.trials:
        if not t.passed:
            lines.append(
                f"  failed trial seed {t.seed} {t.distribution} {t.order} [{t.shape_set}]: "
                f"{t.mismatched}/{t.total} mismatched"
                + (f", max abs err {t.max_abs_error:.3g}" if t.max_abs_error is not None else "")
                + (f" — {t.message}" if t.message else "")
            )
    lines.extend(f"  note: {n}" for n in c.notes)
    return Text("\n".join(lines))


def _findings_section(v: Verdict) -> Text:
    if not v.findings:
        return Text("Audit: no findings")
    lines = ["Audit findings:"]
    for f in v.findings:
        where = f" ({f.file}:{f.line})" if f.file and f.line else (f" ({f.file})" if f.file else "")
        lines.append(f"  [{'REJECT' if f.severity == 'reject' else 'warn'}] {f.message}{where}")
        if f.evidence:
            lines.append(f"      {f.evidence.strip()}")
    return Text("\n".join(lines), style="magenta")


def _timing_section(p: Any) -> Text | None:
    if p is None:
        return None
    per = "per training step: forward and backward" if p.timed != "forward" else "per call"
    lines = [f"Timing ({per}):",
             _timing_line("candidate", p.candidate),
             _timing_line("eager", p.eager),
             _timing_line(f"compile ({p.compile_mode})", p.compiled),
             f"  speedup {_x(p.speedup_vs_eager)} vs eager, {_x(p.speedup_vs_compile)} vs torch.compile"]
    if p.noise_pct is not None:
        lines.append(f"  run-to-run spread {p.noise_pct:.1f}%"
                     + (" (L2 flushed between calls)" if p.l2_flushed else " (warm L2)")
                     + (", CUDA graphs" if p.cuda_graphs else ""))
    lines.append(f"  tier: {TIER_WORDS.get(p.tier, p.tier)}")
    return Text("\n".join(lines))


def _speed_of_light_section(s: Any) -> Text | None:
    if s is None or (s.pct_of_ceiling is None and s.floor_ms is None):
        return None
    lines = [f"Speed of light: {s.bound}-bound"]
    if s.pct_of_ceiling is not None:
        lines.append(f"  {s.pct_of_ceiling:.0f}% of the {s.bound} ceiling"
                     + (f" (torch.compile: {s.compiled_pct_of_ceiling:.0f}%)"
                        if s.compiled_pct_of_ceiling is not None else ""))
        if s.above_roofline():
            lines.append(f"  {ABOVE_ROOFLINE} (see the flags)")
    if s.achieved_tbps is not None:
        lines.append(f"  {s.achieved_tbps:.2f} TB/s achieved"
                     + (f" of {s.ceiling_tbps:.2f}" if s.ceiling_tbps else ""))
    if s.achieved_tflops is not None:
        lines.append(f"  {s.achieved_tflops:.1f} TFLOP/s achieved"
                     + (f" of {s.ceiling_tflops:.1f}" if s.ceiling_tflops else ""))
    if s.floor_ms is not None:
        lines.append(f"  roofline floor {s.floor_ms:.4f} ms" + (f" ({s.ceiling_source})" if s.ceiling_source else ""))
    return Text("\n".join(lines))


def _environment_section(v: Verdict) -> Text | None:
    env = v.environment
    if not (env.gpu or env.confinement):
        return None
    bits = [b for b in (env.gpu, env.sm, f"torch {env.torch}" if env.torch else "",
                        f"CUDA {env.cuda}" if env.cuda else "") if b]
    line = "Measured on " + ", ".join(bits) if bits else ""
    if env.confinement:
        line += ("; " if line else "") + "confinement: " + ", ".join(env.confinement)
    return Text(line, style="dim")
