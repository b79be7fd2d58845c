"""What a suite scores: its problems, and the (problem, candidate, sample) jobs from a solutions folder.

Problems: a folder of KernelBench-format files (``*.py``, or sub-folders holding ``problem.py``, like
``examples/``), a KernelBench checkout (``level1/``, ``level2/``, ``level3/``, also under ``KernelBench/``:
each becomes a level), or a list of files. A problem's key is ``level<L>/<stem>`` inside a level, else
its stem (its folder's name for ``problem.py``).

Solutions (``--solutions DIR``), per problem, in this order:

- KernelBench's generation layout, anywhere below DIR: ``level_<L>_problem_<ID>_sample_<S>_kernel.py``
  (``<ID>`` is the integer before the first ``_`` of the problem file's name; every sample is a job);
- ``<key>.py`` or ``<key>/`` (a candidate directory), where ``<key>`` is the problem's key or stem.

Nothing here imports torch or runs a candidate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.errors import KernelpilotError

GENERATION = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py")
LEVEL_DIR = re.compile(r"level(\d+)")


class SuiteInputError(KernelpilotError):
    """The problems or solutions given to `kernelpilot suite` cannot be used as they are."""


@dataclass(frozen=True)
class ProblemRef:
    key: str  # unique in the run: "level1/23_Softmax", or the stem
    path: Path
    level: int | None = None  # the KernelBench level, None outside one
    number: int | None = None  # KernelBench id: the integer before the first "_" of the name

    @property
    def stem(self) -> str:
        return self.path.parent.name if self.path.name == "problem.py" else self.path.stem


@dataclass(frozen=True)
class Job:
    problem: ProblemRef
    candidate: Path | None  # None: no solution for this problem (scored as a failure)
    sample: int = 0

    @property
    def key(self) -> str:
        return f"{self.problem.key}#{self.sample}"


def _number(stem: str) -> int | None:
    head = stem.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _looks_like_problem(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "class Model" in text and "def get_inputs" in text


def _problem_files(folder: Path) -> list[Path]:
    """The folder's problem files: scripts beside them (no Model / get_inputs) are not problems."""
    files = [p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_") and _looks_like_problem(p)]
    files += [d / "problem.py" for d in sorted(folder.iterdir()) if d.is_dir() and (d / "problem.py").is_file()]
    return files


def _level_dirs(folder: Path) -> dict[int, Path]:
    for root in (folder, folder / "KernelBench"):
        found = {int(m.group(1)): d for d in sorted(root.glob("level*")) if d.is_dir() and (m := LEVEL_DIR.fullmatch(d.name))}
        if found:
            return found
    return {}


def discover_problems(paths: list[Path], levels: list[int] | None = None) -> list[ProblemRef]:
    """The problems named by ``paths`` (see the module docstring); ``levels`` keeps only those levels."""
    refs: list[ProblemRef] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise SuiteInputError(f"{path} does not exist; pass a folder of problem files, a KernelBench checkout or problem files.")
        if path.is_file():
            level = LEVEL_DIR.fullmatch(path.parent.name)
            lv = int(level.group(1)) if level else None
            refs.append(_ref(path, lv))
            continue
        by_level = _level_dirs(path)
        if by_level:
            for lv, d in sorted(by_level.items()):
                if levels is None or lv in levels:
                    refs += [_ref(p, lv) for p in _problem_files(d)]
            continue
        files = _problem_files(path)
        if not files:
            raise SuiteInputError(f"{path} holds no problem files (*.py, or folders with problem.py, or level1/ level2/ ...); "
                                  "pass a folder of KernelBench-format problems.")
        refs += [_ref(p, None) for p in files]
    if levels is not None:
        refs = [r for r in refs if r.level in levels]
    seen: dict[str, Path] = {}
    for r in refs:
        if r.key in seen and seen[r.key] != r.path:
            raise SuiteInputError(f"two problems share the name {r.key!r} ({seen[r.key]} and {r.path}); rename one.")
        seen[r.key] = r.path
    unique = list({r.key: r for r in refs}.values())
    if not unique:
        raise SuiteInputError("no problems to score; check the paths (and --levels).")
    return unique


def _ref(path: Path, level: int | None) -> ProblemRef:
    path = path.resolve()
    stem = path.parent.name if path.name == "problem.py" else path.stem
    return ProblemRef(key=f"level{level}/{stem}" if level is not None else stem, path=path, level=level,
                      number=_number(stem))


def parse_generation_name(name: str) -> tuple[int, int, int] | None:
    """(level, problem id, sample) of ``level_<L>_problem_<ID>_sample_<S>_kernel.py``, else None."""
    m = GENERATION.fullmatch(name)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def discover_jobs(problems: list[ProblemRef], solutions: Path) -> list[Job]:
    """One job per (problem, sample) found in ``solutions``; a problem without any gets one job with no candidate."""
    solutions = Path(solutions).expanduser()
    if not solutions.is_dir():
        raise SuiteInputError(f"solutions folder {solutions} does not exist; pass the folder that holds one "
                              "<problem>.py or <problem>/ per problem, or KernelBench's level_<L>_problem_<ID>_sample_<S>_kernel.py files.")
    generated: dict[tuple[int, int], dict[int, Path]] = {}
    for f in sorted(solutions.rglob("level_*_problem_*_sample_*_kernel.py")):
        parsed = parse_generation_name(f.name)
        if parsed:
            level, number, sample = parsed
            generated.setdefault((level, number), {}).setdefault(sample, f.resolve())
    jobs: list[Job] = []
    for ref in problems:
        samples = generated.get((ref.level if ref.level is not None else 0, ref.number)) if ref.number is not None else None
        if samples is None and ref.level is None and ref.number is not None:
            matches = [s for (_lv, n), s in generated.items() if n == ref.number]
            samples = matches[0] if len(matches) == 1 else None  # outside a level: only an unambiguous id
        if samples:
            jobs += [Job(ref, path, sample) for sample, path in sorted(samples.items())]
            continue
        jobs.append(Job(ref, _named_solution(solutions, ref), 0))
    return jobs


def _named_solution(solutions: Path, ref: ProblemRef) -> Path | None:
    for name in dict.fromkeys((ref.key, ref.stem)):
        for cand in (solutions / f"{name}.py", solutions / name):
            if cand.exists():
                return cand.resolve()
    return None
