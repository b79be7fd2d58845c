"""What the build step says beside its build: notes and warnings read from the single-file builder's result line
(the candidate's own arch list, confinement, what building ModelNew on the meta device compiled, a file whose
compile calls never ran) for the build report's diagnostics."""

from __future__ import annotations

import ast

from kernelpilot.evaluation.candidate import Candidate
from kernelpilot.evaluation.sandbox.build_step import unconfined_note
from kernelpilot.evaluation.static.compile_calls import compile_calls
from kernelpilot.verdict import Diagnostic


def builder_notes(result: dict, arch: str, unconfined: str, built: Candidate | None = None) -> list[Diagnostic]:
    """Notes from the builder's result line: the candidate's own arch list, confinement, the ModelNew probe, and
    (``built``: the candidate, when its build succeeded) a single file whose compile calls never ran."""
    notes = []
    if built is not None and built.kind == "single_file" and "extensions" not in result and "directory" in result:
        notes += nothing_compiled(built)
    if "arch_list" in result:
        notes.append(arch_list_diagnostic(str(result["arch_list"]), arch))
    unconfined = unconfined or str(result.get("unconfined") or "")  # the builder could not apply the spec
    if unconfined:
        notes.append(Diagnostic(severity="note", tool="build", message=unconfined_note(unconfined)))
    if result.get("model_built") is False:
        notes.append(Diagnostic(severity="note", tool="build", message=(
            "ModelNew(...) could not be built in the build step (" + str(result.get("model_note", "")) + "); a "
            "load_inline it calls after that point compiles in the worker, counted as build time")))
    if result.get("probe_compiled"):
        notes.append(Diagnostic(severity="note", tool="build", message=(
            "compiled in the build step by building ModelNew and calling it on the meta device: "
            + ", ".join(dict.fromkeys(str(n) for n in result["probe_compiled"])))))
    return notes


NOTHING_COMPILED = "no extension was compiled"  # the warning's first words (assembly.py drops it once the worker has)


def nothing_compiled(candidate: Candidate) -> list[Diagnostic]:
    """A warning when the file calls ``load_inline`` / ``load`` and none of those calls ran in the build step
    (behind ``if torch.cuda.is_available():`` on a machine without a GPU, or where the meta-device probe did not
    reach): the build read as done while none of the file's C++/CUDA had been compiled."""
    try:
        calls = compile_calls(ast.parse(candidate.path.read_text()))
    except (OSError, SyntaxError, ValueError):
        return []
    if not calls:
        return []
    lines = ", ".join(str(call.lineno) for call, _ in calls[:4])
    return [Diagnostic(severity="warning", tool="build", file=candidate.path.name, line=calls[0][0].lineno, message=(
        f"{NOTHING_COMPILED}: the file's load_inline/load call(s) (line {lines}) did not run in the build "
        "step, which imports the file, builds ModelNew and calls it on the meta device; a call behind a condition "
        "(torch.cuda.is_available() on a machine without a GPU) or out of that probe's reach compiles only where "
        "it runs, in the worker (counted as build time), and none of the file's C++/CUDA was checked here"))]


ARCH_LIST_TOOL = "arch-list"  # the diagnostic the evaluator turns into the finding of that name


def arch_list_diagnostic(arch_list: str, target: str) -> Diagnostic:
    """The candidate set TORCH_CUDA_ARCH_LIST itself: a warning, which says whether this GPU is in it."""
    digits = target.removeprefix("sm_").rstrip("a")
    wanted = f"{digits[:-1]}.{digits[-1]}" if digits.isdigit() and len(digits) >= 2 else target
    listed = [a.strip() for a in arch_list.replace(";", " ").split()]
    covered = any(a.split("+")[0].rstrip("a") == wanted for a in listed)
    message = f"the candidate sets TORCH_CUDA_ARCH_LIST={arch_list!r} for its own build"
    if not covered:
        message += (f"; it does not include this GPU's architecture ({wanted}): its kernels run only if PTX was "
                    "embedded (+PTX) and JIT-compiled at load, or not at all")
    return Diagnostic(severity="warning", tool=ARCH_LIST_TOOL, message=message)
