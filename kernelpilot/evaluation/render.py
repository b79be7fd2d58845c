"""Plain-text renderings of a Verdict: one summary line, a terminal report, a compact model view."""

from __future__ import annotations

from kernelpilot.verdict import ABOVE_ROOFLINE, Timing, Verdict

_TIER_WORDS = {
    "incorrect": "incorrect",
    "correct": "correct, not faster than eager",
    "faster_than_eager": "faster than eager (>5%)",
    "faster_than_compile": "faster than torch.compile (>5%)",
}


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} us" if value < 1 else f"{value:.3f} ms"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def summary_line(v: Verdict) -> str:
    """One line for humans and the model (and, under a KernelBench preset, KernelBench's own score)."""
    line = _summary(v)
    kb = v.kernelbench
    if kb is not None:
        speed = f", {kb.speedup:.2f}x vs its reference" if kb.speedup else ""
        line += f" | KernelBench {kb.preset or ''} ({kb.precision}): {kb.status.replace('_', ' ')}{speed}"
    return line


def _summary(v: Verdict) -> str:
    rejects = [f for f in v.findings if f.severity == "reject"]
    if v.status == "superseded":
        return "superseded: a newer save cancelled this evaluation (not a failure)"
    if v.status == "build_error":
        first = next((d for d in (v.build.diagnostics if v.build else []) if d.severity == "error"), None)
        where = f" at {first.file}:{first.line}" if first and first.file else ""
        what = (first.message if first else v.error).splitlines()[0] if (first or v.error) else "see log"
        return f"build error{where}: {what}"
    if v.status == "rejected" and rejects:
        f = rejects[0]
        more = f" (+{len(rejects) - 1} more)" if len(rejects) > 1 else ""
        return f"rejected [{f.rule}]: {f.message}{more}"
    if v.status in ("runtime_error", "timeout", "problem_too_large"):
        first = (v.error or "").strip().splitlines()
        again = " (after a retry in a fresh worker)" if v.attempts else ""
        return f"{v.status.replace('_', ' ')}{again}: {first[0] if first else 'no message'}"
    c = v.correctness
    if v.status == "incorrect":
        bad = next((t for t in (c.trials if c else []) if not t.passed), None)
        detail = bad.message if bad else "failed the correctness check"
        where = f" (trial seed {bad.seed}, {bad.distribution}, {bad.shape_set})" if bad else ""
        return f"incorrect: {detail}{where}"
    if v.mode == "build":
        return "built" + (f" in {v.build.seconds:.1f} s" if v.build else "")
    p = v.performance
    text = "correct"
    if c and c.trials:
        worst = max((t.normalized_error or 0.0) for t in c.trials)
        text += f" ({len(c.trials)} trials, max normalised error {worst:.2g})"
    if p and p.candidate:
        step = " a training step (forward+backward)" if p.timed != "forward" else ""
        text += (f"; {_ms(p.candidate.median_ms)}{step}, {_x(p.speedup_vs_eager)} vs eager, "
                 f"{_x(p.speedup_vs_compile)} vs torch.compile")
        if v.speed_of_light and v.speed_of_light.pct_of_ceiling is not None:
            text += f", {v.speed_of_light.pct_words()}"
        if p.compiled_missing:
            text += f"; no torch.compile baseline ({p.compiled_missing.splitlines()[0][:160]})"
    if v.flaky:
        text += "; flaky: its first worker died, a fresh one ran it without dying"
    if v.flags:
        text += f" [{len(v.flags)} flag{'s' if len(v.flags) > 1 else ''}]"
    return text


def _timing_row(name: str, t: Timing | None, speedup: str) -> str:
    if t is None:
        return f"  {name:<14} {'-':>11}"
    host, launch = _ms(t.host_median_ms), _ms(t.launch_median_ms)
    return (f"  {name:<14} {_ms(t.median_ms):>11} {_ms(t.q1_ms):>11} {_ms(t.q3_ms):>11} {_ms(t.min_ms):>11} "
            f"{launch:>11} {host:>11} {speedup:>8}")


def render_text(v: Verdict) -> str:
    """The readable report ``kernelpilot eval`` prints."""
    lines = [f"verdict: {v.status.upper()}  {v.summary or summary_line(v)}",
             f"problem: {v.problem}", f"candidate: {v.candidate}  (mode {v.mode}, {v.seconds:.1f} s)"]
    if v.phases:
        lines.append("time spent: " + ", ".join(f"{k.replace('_', ' ')} {sec:.1f} s" for k, sec in v.phases.items()))
    if v.build:
        b = v.build
        lines.append(f"build: {'ok' if b.ok else 'FAILED'} in {b.seconds:.1f} s"
                     + (f", rebuilt {', '.join(b.rebuilt)}" if b.rebuilt else "")
                     + (", nothing compiled (cache hit)" if b.cache == "hit" else ""))
        for d in b.diagnostics[:12]:
            loc = f"{d.file}:{d.line}: " if d.file else ""
            lines.append(f"  {d.severity}: {loc}{d.message}")
        for k in b.kernels[:8]:
            lines.append(f"  kernel {k.kernel} [{k.arch}]: {k.registers} regs, {k.shared_bytes} B smem, "
                         f"{k.spill_stores_bytes or 0} B spill stores")
    if v.findings:
        lines.append("findings:")
        for f in v.findings:
            loc = f" ({f.file}:{f.line})" if f.file else ""
            ev = f"  <- {f.evidence}" if f.evidence else ""
            lines.append(f"  [{f.severity}] {f.rule}{loc}: {f.message}{ev}")
    c = v.correctness
    if c:
        lines.append(f"correctness: {'PASS' if c.passed else 'FAIL'}  atol={c.atol} rtol={c.rtol} "
                     f"max normalised error={c.max_normalized_error}")
        lines.append(f"  {'seed':>10} {'distribution':<12} {'order':<16} {'shapes':<10} {'result':<6} "
                     f"{'max abs':>9} {'norm err':>9} {'ref err':>9}")
        for t in c.trials:
            lines.append(f"  {t.seed:>10} {t.distribution:<12} {t.order:<16} {t.shape_set:<10} "
                         f"{'pass' if t.passed else 'FAIL':<6} {_g(t.max_abs_error):>9} {_g(t.normalized_error):>9} "
                         f"{_g(t.reference_normalized_error):>9}" + (f"  {t.message}" if t.message else ""))
        lines.append(f"  deterministic={c.deterministic} inputs unmodified={c.inputs_unmodified} "
                     f"fully written={c.fully_written} in bounds={c.in_bounds} discriminates={c.discriminates}"
                     + (" outputs own storage=False" if c.outputs_own_storage is False else ""))
        lines += [f"  note: {n}" for n in c.notes]
    p = v.performance
    if p and p.candidate:
        lines.append(f"timing (median of {p.candidate.samples}, each call {p.timed}, L2 flushed={p.l2_flushed}, "
                     f"CUDA graphs={p.cuda_graphs}, noise {_g(p.noise_pct)}%):")
        if p.candidate.launch_median_ms is not None:
            lines.append("  device time: each timed call queued behind a GPU spin, so host launch overhead is "
                         "excluded; 'launch' = event time from an idle GPU (includes it), 'host' = host clock with "
                         "full sync")
        lines.append(f"  {'':<14} {'median':>11} {'q1':>11} {'q3':>11} {'min':>11} {'launch':>11} {'host':>11} "
                     f"{'speedup':>8}")
        lines.append(_timing_row("eager", p.eager, "1.00x"))
        if p.compiled:
            ratio = p.eager.median_ms / p.compiled.median_ms if p.eager and p.compiled.median_ms else None
            lines.append(_timing_row(f"compile({p.compile_mode})", p.compiled, _x(ratio)))
        lines.append(_timing_row("candidate", p.candidate, _x(p.speedup_vs_eager)))
        lines.append(f"  tier: {_TIER_WORDS.get(p.tier, p.tier)}; vs torch.compile {_x(p.speedup_vs_compile)}")
    s = v.speed_of_light
    if s and s.floor_ms:
        lines.append(f"speed of light: {s.bound}-bound floor {_ms(s.floor_ms)} "
                     f"({_g(s.ceiling_tbps)} TB/s, {_g(s.ceiling_tflops)} TFLOP/s; {s.ceiling_source})")
        lines.append(f"  candidate {_g(s.achieved_tbps)} TB/s, {_g(s.achieved_tflops)} TFLOP/s = "
                     f"{_g(s.pct_of_ceiling)}% of ceiling; torch.compile {_g(s.compiled_pct_of_ceiling)}%")
    for flag in v.flags:
        lines.append(f"flag: {flag}")
    if v.error and v.status in ("runtime_error", "timeout", "build_error"):
        lines.append("error:")
        lines += ["  " + line for line in v.error.splitlines()[-30:]]
    e = v.environment
    if e.gpu or e.torch:
        lines.append(f"environment: {e.gpu} {e.sm}, driver {e.driver}, torch {e.torch}, CUDA {e.cuda}, "
                     f"python {e.python}")
        if e.confinement:
            lines.append(f"  confinement: {', '.join(e.confinement)}")
        if e.relaxed_rules:
            lines.append(f"  relaxed policy rules: {', '.join(e.relaxed_rules)}")
    return "\n".join(lines)


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def for_model(v: Verdict, max_lines: int = 40) -> str:
    """A compact view for the LLM: status, what failed and where, the numbers that matter."""
    lines = [f"status: {v.status}", f"summary: {v.summary or summary_line(v)}"]
    if v.build and not v.build.ok:
        for d in v.build.diagnostics[:8]:
            loc = f"{d.file}:{d.line}: " if d.file else ""
            lines.append(f"{d.severity}: {loc}{d.message}")
    for f in sorted(v.findings, key=lambda f: f.severity != "reject")[:6]:  # rejections first
        loc = f" {f.file}:{f.line}" if f.file else ""
        lines.append(f"finding [{f.severity}] {f.rule}{loc}: {f.message}" + (f" | {f.evidence}" if f.evidence else ""))
    c = v.correctness
    if c:
        failed = [t for t in c.trials if not t.passed][:4]
        lines.append(f"correctness: {'pass' if c.passed else 'fail'} ({len(c.trials) - len(failed)}/{len(c.trials)} "
                     f"trials), atol={c.atol} rtol={c.rtol}")
        for t in failed:
            lines.append(f"  failed trial seed={t.seed} {t.distribution} {t.order} {t.shape_set}: {t.message}")
        lines += [f"  note: {n}" for n in c.notes[:3]]
    p = v.performance
    if p and p.candidate:
        lines.append(f"time: candidate {_ms(p.candidate.median_ms)} (IQR {_ms(p.candidate.iqr_ms)}), "
                     f"eager {_ms(p.eager.median_ms if p.eager else None)}, "
                     f"torch.compile {_ms(p.compiled.median_ms if p.compiled else None)}")
        lines.append(f"speedup: {_x(p.speedup_vs_eager)} vs eager, {_x(p.speedup_vs_compile)} vs compile; "
                     f"tier {p.tier}")
    s = v.speed_of_light
    if s and s.pct_of_ceiling is not None:
        above = f", {ABOVE_ROOFLINE}" if s.above_roofline() else ""
        lines.append(f"speed of light: {s.pct_of_ceiling:.0f}% of the {s.bound} ceiling{above} "
                     f"(floor {_ms(s.floor_ms)}; torch.compile at {_g(s.compiled_pct_of_ceiling)}%)")
    lines += [f"flag: {f}" for f in v.flags[:4]]
    if v.error and v.status in ("runtime_error", "timeout"):
        lines.append("error:")
        lines += ["  " + x for x in v.error.strip().splitlines()[-12:]]
    return "\n".join(lines[:max_lines])
