"""One evaluation's state on the caller's side, and the verdict assembled from it: the steps' results, the
worker's answer merged in, KernelBench's view of a candidate stopped before the worker, the summary line."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.evaluation.baselines.values import Baselines
from kernelpilot.evaluation.build.builder_notes import NOTHING_COMPILED
from kernelpilot.evaluation.build.device_only import SassCheck
from kernelpilot.evaluation.candidate import Candidate
from kernelpilot.evaluation.render import summary_line
from kernelpilot.evaluation.settings import EvalSettings
from kernelpilot.evaluation.supersede import CancelToken
from kernelpilot.verdict import BuildReport, Diagnostic, KernelBenchScore, KernelResources, Verdict


@dataclass
class Evaluation:
    """What one ``Evaluator.evaluate`` call knows so far (the arguments it was called with, for a second try)."""

    v: Verdict
    settings: EvalSettings
    mode: str
    problem_path: Path
    cand_path: Path
    problem_arg: Any  # as the caller gave it: a path or an object with ``path``
    candidate_arg: Any
    own_kernels: list[str] | None
    kernels: list[str]
    baseline: Baselines | None = None
    token: CancelToken | None = None
    cand_obj: Candidate | None = None
    model_file: Path = Path()
    worker_env: dict[str, str] = field(default_factory=dict)
    build_dirs: list[Path] = field(default_factory=list)
    sass_check: SassCheck | None = None  # the SASS identity check of a device-only build
    started: float = field(default_factory=time.monotonic)
    on_tested: Callable[[Verdict], None] | None = None  # a benchmark's test verdict, before its timing

    def tested(self, frame: dict[str, Any]) -> Verdict:
        """The test verdict a staged benchmark's worker sent before timing (protocol.TESTED), as a test request's
        verdict of this candidate: a copy of the verdict so far, with the worker's part merged in."""
        v = copy.deepcopy(self.v)
        v.mode = "test"
        merged = merge_response(v, frame)
        if self.sass_check is not None and v.build is not None:
            v.build.sass_check = self.sass_check.wait(0.0)
        v.status = merged.status
        v.seconds = round(time.monotonic() - self.started, 3)
        v.summary = summary_line(v)
        return v

    @property
    def cancelled(self) -> bool:
        return self.token is not None and self.token.cancelled

    @property
    def candidate(self) -> Candidate:
        if self.cand_obj is None:
            raise RuntimeError("internal error: the candidate was used before it was loaded")
        return self.cand_obj

    def done(self, status: str) -> Verdict:
        """The verdict, ended with ``status``."""
        v, s = self.v, self.settings
        v.status = status  # type: ignore[assignment]
        harness = s.ruleset.harness
        if harness is not None and v.kernelbench is None and status in ("rejected", "build_error"):
            # stopped before the worker: KernelBench's view of the same file
            refused = next((f for f in v.findings if f.severity == "reject"), None)
            v.kernelbench = KernelBenchScore(
                preset=harness.version, commit=harness.commit, precision=s.kb_precision,
                status="compile_error" if status == "build_error" else "not_run",
                error=(v.error or "the build failed")[:400] if status == "build_error" else
                f"refused before running by our static policy [{refused.rule if refused else '?'}]")
        v.seconds = round(time.monotonic() - self.started, 3)
        v.summary = summary_line(v)
        return v


_KERNEL_FIELDS = tuple(KernelResources.__dataclass_fields__)


def merge_response(v: Verdict, response: dict[str, Any]) -> Verdict:
    """The worker's answer to an evaluate request, merged into ``v``; returns the worker's own part."""
    part = response.get("verdict") or {}
    merged = Verdict.from_dict({"status": part.get("status", "runtime_error"), **part})
    v.correctness, v.performance, v.speed_of_light = merged.correctness, merged.performance, merged.speed_of_light
    v.memory = merged.memory
    v.kernelbench = merged.kernelbench
    v.findings.extend(merged.findings)
    v.flags.extend(merged.flags)
    v.phases.update(merged.phases or {})
    if v.build is not None and isinstance(part.get("build_kernels"), list):  # CuTe: compiled in the worker
        have = {(k.kernel, k.arch) for k in v.build.kernels}
        for k in part["build_kernels"]:
            if isinstance(k, dict) and (k.get("kernel"), k.get("arch")) not in have:
                v.build.kernels.append(KernelResources(**{f: k.get(f) for f in _KERNEL_FIELDS if f in k}))
    if v.build is not None and isinstance(part.get("build_compiles"), list):  # CuTe: each cute.compile, how served
        _cute_compiles(v.build, [c for c in part["build_compiles"] if isinstance(c, dict)])
    if v.build is not None and "build_in_worker" in v.phases:  # the worker compiled what the build step did not run
        v.build.diagnostics = [d for d in v.build.diagnostics if not d.message.startswith(NOTHING_COMPILED)]
    for extra in ("build_warmup", "build_in_worker"):  # Triton's warm-up, load_inline in __init__/forward
        if v.build is not None and extra in v.phases:
            v.build.seconds = round(v.build.seconds + v.phases[extra], 3)
    window = response.get("window")
    if isinstance(window, list) and len(window) == 2:
        v.worker_window = [float(window[0]), float(window[1])]
    if isinstance(response.get("busy_s"), (int, float)):
        v.phases["worker_busy"] = float(response["busy_s"])
    if isinstance(response.get("prepare_s"), (int, float)):  # part of worker_busy, before the request
        v.phases["prepare"] = float(response["prepare_s"])
    v.error = merged.error
    return merged


def _cute_compiles(build: BuildReport, compiles: list[dict[str, Any]]) -> None:
    """The CuTe functions compiled in the worker this time go in ``rebuilt``; when every ``cute.compile`` was
    loaded from kernelpilot's compile cache, ``cache`` is "hit": a re-run with nothing changed compiles nothing. Why
    the cache could not serve or keep a function (its ``note``) is a warning of the build section."""
    compiled = [f"cute.compile {c.get('function')}" for c in compiles if c.get("how") != "loaded"]
    build.rebuilt += [name for name in dict.fromkeys(compiled) if name not in build.rebuilt]
    if compiles and not compiled:
        build.cache = "hit"
    notes = dict.fromkeys(f"CuTe compile cache, {c.get('function')}: {c['note']}" for c in compiles if c.get("note"))
    have = {d.message for d in build.diagnostics}
    build.diagnostics += [Diagnostic("warning", n, tool="cute") for n in notes if n not in have]
