"""Claimed speedups (``--claims FILE``) beside the measured ones.

The file is a CSV with a header. Columns (any order, names case-insensitive):

- ``problem``: a problem key (``level1/23_Softmax``), a stem (``23_Softmax``) or a KernelBench id
  (``level1/23``, ``1/23``, or ``1,23`` quoted); or two columns ``level`` and ``problem_id`` instead;
- ``sample`` (optional): the sample the claim is about (default 0, the sample KernelBench scores);
- ``claimed_x_eager`` and/or ``claimed_x_compile``: speedups as ratios (1.5 means 1.5x, not 150%);
- ``gpu`` (optional): the GPU the figure was claimed on.

Every row is kept: one that names no problem of the run, or the same problem and sample as an earlier
row, is reported as such, never dropped. A claim holds when the measured speedup is at least 0.9 x the
claim, or the claim is within the measured spread (interquartile times of candidate and baseline); it
does not hold otherwise; there is no honest verdict when our status is not ``ok`` or nothing was measured.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelpilot.errors import KernelpilotError
from kernelpilot.suite.discovery import KB_ID, ProblemRef, problem_matches

HOLDS_FRACTION = 0.9
FIGURES = ("claimed_x_eager", "claimed_x_compile")
KNOWN = {"problem", "level", "problem_id", "sample", "gpu", *FIGURES}
Judgement = Literal["holds", "does not hold", "no honest verdict"]


class ClaimsError(KernelpilotError):
    """The claims file cannot be read as it is; the message says what to fix."""

    kind = "usage"


@dataclass(frozen=True)
class Claim:
    line: int  # the row's line in the file (the header is line 1)
    problem: str  # as written ("level1/23_Softmax", "1/23"); "L/ID" when given as level and problem_id
    sample: int = 0
    x_eager: float | None = None
    x_compile: float | None = None
    gpu: str = ""


@dataclass
class ClaimResult:
    claim: Claim
    key: str | None = None  # the run's problem key, None when unmatched
    why_unmatched: str = ""
    duplicate_of: int | None = None  # the line of an earlier row with the same problem and sample
    status: str = ""  # our status of that job ("not run yet" when none)
    figures: list[dict[str, Any]] = field(default_factory=list)  # one per claimed figure


def _ratio(text: str, column: str, line: int, errors: list[str]) -> float | None:
    text = text.strip()
    if not text:
        return None
    if text.endswith("%"):
        errors.append(f"line {line}: {column} is {text!r}: write the speedup as a ratio (1.5 for 1.5x), not a percent")
        return None
    try:
        value = float(text.rstrip("xX"))
    except ValueError:
        errors.append(f"line {line}: {column} is {text!r}, not a number; write the speedup as a ratio, e.g. 1.5")
        return None
    if not math.isfinite(value) or value <= 0:
        errors.append(f"line {line}: {column} is {text!r}; a speedup is a positive ratio, e.g. 1.5")
        return None
    return value


def parse_claims(path: str | Path) -> list[Claim]:
    """Every row of the claims file; ClaimsError lists every problem found (with its line) and what to write."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ClaimsError(f"cannot read the claims file {p}: {exc.strerror or exc}; pass a CSV file.") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows or not any(c.strip() for c in rows[0]):
        raise ClaimsError(f"{p} is empty; its first line must be a header such as "
                          "`problem,sample,claimed_x_eager,claimed_x_compile,gpu`.")
    header = [c.strip().lower() for c in rows[0]]
    errors: list[str] = []
    unknown = [c for c in header if c not in KNOWN]
    if unknown:
        errors.append(f"header: unknown column(s) {', '.join(map(repr, unknown))}; the columns are "
                      f"{', '.join(sorted(KNOWN))}")
    has_pair = "level" in header and "problem_id" in header
    if "problem" not in header and not has_pair:
        errors.append("header: no `problem` column (or `level` and `problem_id` columns) to say which problem each "
                      "row is")
    if not any(f in header for f in FIGURES):
        errors.append("header: no `claimed_x_eager` or `claimed_x_compile` column: nothing is claimed")
    if errors:
        raise ClaimsError(f"{p}: " + "; ".join(errors))
    col = {name: header.index(name) for name in header}
    claims: list[Claim] = []
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue  # a blank line
        if len(row) != len(header):
            errors.append(f"line {n}: {len(row)} fields for a header of {len(header)} (a problem like 1,23 must be "
                          "quoted: \"1,23\")")
            continue

        def cell(name: str, row: list[str] = row) -> str:
            return row[col[name]].strip() if name in col else ""

        problem = cell("problem")
        if not problem and has_pair:
            level, pid = cell("level").lower().removeprefix("level"), cell("problem_id")
            if not (level.isdigit() and pid.isdigit()):
                errors.append(f"line {n}: level {cell('level')!r} and problem_id {pid!r} must be integers (e.g. 1 "
                              "and 23)")
                continue
            problem = f"{int(level)}/{int(pid)}"
        if not problem:
            errors.append(f"line {n}: no problem; write a key (level1/23_Softmax) or an id (1/23)")
            continue
        sample_text = cell("sample") or "0"
        if not sample_text.isdigit():
            errors.append(f"line {n}: sample {sample_text!r} is not a sample number (0, 1, ...)")
            continue
        eager = _ratio(cell("claimed_x_eager"), "claimed_x_eager", n, errors)
        compiled = _ratio(cell("claimed_x_compile"), "claimed_x_compile", n, errors)
        if eager is None and compiled is None and not any(e.startswith(f"line {n}:") for e in errors):
            errors.append(f"line {n}: no claimed figure; fill claimed_x_eager or claimed_x_compile")
            continue
        claims.append(Claim(n, problem, int(sample_text), eager, compiled, cell("gpu")))
    if errors:
        shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20 else [])
        raise ClaimsError(f"{p}: " + "; ".join(shown))
    return claims


def resolve(claim: Claim, refs: list[ProblemRef]) -> tuple[str | None, str]:
    """The run's problem key a claim names, or None and why."""
    text = claim.problem.strip()
    pair = text.replace(" ", "").split(",")
    if len(pair) == 2 and all(x.removeprefix("level").isdigit() for x in pair):
        text = f"{pair[0].removeprefix('level')}/{pair[1]}"
    if KB_ID.fullmatch(text) or text.isdigit():  # "1/23", "level1/23"; an id alone matches it in every level
        found = [r for r in refs if problem_matches(text, r)]
    else:
        found = [r for r in refs if text in (r.key, r.stem)]
    if len(found) == 1:
        return found[0].key, ""
    if found:
        return (None,
                f"{claim.problem!r} names {len(found)} problems ({', '.join(r.key for r in found[:3])}); use its key")
    return None, f"{claim.problem!r} names no problem of the run"


def _spread(v: dict[str, Any], baseline: str) -> tuple[float, float] | None:
    """The speedup's range from the interquartile times: baseline q1 / candidate q3 .. baseline q3 / candidate q1."""
    perf = v.get("performance") or {}
    cand, base = perf.get("candidate") or {}, perf.get(baseline) or {}
    try:
        return base["q1_ms"] / cand["q3_ms"], base["q3_ms"] / cand["q1_ms"]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def judge(claimed: float, measured: float | None, spread: tuple[float, float] | None, honest: bool,
          why: str) -> tuple[Judgement, str]:
    if not honest:
        return "no honest verdict", why
    if measured is None:
        return "no honest verdict", why or "nothing measured"
    if measured >= HOLDS_FRACTION * claimed:
        return "holds", f"measured {measured:.2f}x >= {HOLDS_FRACTION:g} x {claimed:.2f}x"
    if spread is not None and spread[0] <= claimed <= spread[1]:
        return "holds", f"{claimed:.2f}x is within the measured spread {spread[0]:.2f}x-{spread[1]:.2f}x"
    return "does not hold", f"measured {measured:.2f}x < {HOLDS_FRACTION:g} x {claimed:.2f}x" + (
        f" (spread {spread[0]:.2f}x-{spread[1]:.2f}x)" if spread else "")


def check_claims(claims: list[Claim], refs: list[ProblemRef], verdicts: dict[tuple[str, int], dict[str, Any]],
                 statuses: dict[tuple[str, int], str]) -> list[ClaimResult]:
    """Each claim beside the measured figures of its job (``verdicts``/``statuses`` by (problem key, sample))."""
    seen: dict[tuple[str, int], int] = {}
    out: list[ClaimResult] = []
    for c in claims:
        key, why = resolve(c, refs)
        res = ClaimResult(c, key, why)
        if key is not None:
            res.duplicate_of = seen.get((key, c.sample))
            seen.setdefault((key, c.sample), c.line)
            v = verdicts.get((key, c.sample)) or {}
            res.status = statuses.get((key, c.sample), "not run yet")
            res.figures = _figures(c, v, res.status)
        out.append(res)
    return out


def _figures(c: Claim, v: dict[str, Any], status: str) -> list[dict[str, Any]]:
    perf = v.get("performance") or {}
    kb = v.get("kernelbench") or {}
    honest = status == "ok"
    why = f"our status is {status}" if not honest else ""
    rows = []
    for name, claimed, measured, baseline in (("x eager", c.x_eager, perf.get("speedup_vs_eager"), "eager"),
                                              ("x torch.compile", c.x_compile, perf.get("speedup_vs_compile"),
                                               "compiled")):
        if claimed is None:
            continue
        missing = "" if measured is not None else (
            perf.get("compiled_missing") or f"no {baseline} timing (run in benchmark mode)") if honest else why
        verdict, because = judge(claimed, measured, _spread(v, baseline), honest, why or missing)
        rows.append({"figure": name, "claimed": claimed, "measured": measured, "spread": _spread(v, baseline),
                     "kernelbench_measured": kb.get("speedup") if baseline == "eager" else None,
                     "verdict": verdict, "why": because})
    return rows
