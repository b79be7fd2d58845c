"""What a suite scores: its problems, and the (problem, candidate, sample) jobs from a solutions folder.

Problems: a folder of KernelBench-format files (``*.py``, or sub-folders holding ``problem.py``, like
``examples/``), a KernelBench checkout (``level1/``, ``level2/``, ``level3/``, also under ``KernelBench/``:
each becomes a level), or a list of files. A problem's key is ``level<L>/<stem>`` inside a level, else
its stem (its folder's name for ``problem.py``). A ``level<L>`` folder given on its own keeps its level.

Solutions (``--solutions DIR``), per problem, in this order:

- KernelBench's generation layout, anywhere below DIR: ``level_<L>_problem_<ID>_sample_<S>_kernel.py``
  (``<ID>`` is the integer before the first ``_`` of the problem file's name; every sample is a job);
- ``<key>.py`` or ``<key>/`` (a candidate directory), where ``<key>`` is the problem's key or stem.

Choosing jobs (``select_jobs``): the plan is every job of the problems given; ``--levels``, ``--problems``
and ``--limit`` only choose which of its jobs without a verdict one call runs. ``kernelbench_sources``
names the KernelBench commit a checkout's problems came from.

Nothing here imports torch or runs a candidate.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError

GENERATION = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py")
GENERATION_GLOB = "level_*_problem_*_sample_*_kernel.py"  # the files GENERATION may name
LEVEL_DIR = re.compile(r"level(\d+)")
KB_ID = re.compile(r"(?:level)?(\d+)/(\d+)")  # "level2/5" or "2/5": level 2, KernelBench id 5
COMMIT_HASH = re.compile(r"[0-9a-fA-F]{7,40}")


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
        found = {int(m.group(1)): d for d in sorted(root.glob("level*"))
                 if d.is_dir() and (m := LEVEL_DIR.fullmatch(d.name))}
        if found:
            return found
    return {}


def discover_problems(paths: list[Path], levels: list[int] | None = None) -> list[ProblemRef]:
    """The problems named by ``paths`` (see the module docstring); ``levels`` keeps only those levels."""
    refs: list[ProblemRef] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise SuiteInputError(f"{path} does not exist; pass a folder of problem files, a KernelBench checkout or "
                                  "problem files.")
        if path.is_file():
            level = LEVEL_DIR.fullmatch(path.parent.name)
            lv = int(level.group(1)) if level else None
            refs.append(_ref(path, lv))
            continue
        by_level = _level_dirs(path)
        if not by_level and (named := LEVEL_DIR.fullmatch(path.name)):
            by_level = {int(named.group(1)): path}  # one level folder of a checkout keeps its level
        if by_level:
            for lv, d in sorted(by_level.items()):
                if levels is None or lv in levels:
                    refs += [_ref(p, lv) for p in _problem_files(d)]
            continue
        files = _problem_files(path)
        if not files:
            raise SuiteInputError(f"{path} holds no problem files (*.py, or folders with problem.py, or level1/ "
                                  "level2/ ...); pass a folder of KernelBench-format problems.")
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
                              "<problem>.py or <problem>/ per problem, or KernelBench's "
                              "level_<L>_problem_<ID>_sample_<S>_kernel.py files.")
    generated: dict[tuple[int, int], dict[int, Path]] = {}
    for f in sorted(solutions.rglob(GENERATION_GLOB)):
        parsed = parse_generation_name(f.name)
        if parsed:
            level, number, sample = parsed
            generated.setdefault((level, number), {}).setdefault(sample, f.resolve())
    jobs: list[Job] = []
    for ref in problems:
        samples = (generated.get((ref.level if ref.level is not None else 0, ref.number)) if ref.number is not None
                   else None)
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


# ---- choosing the jobs of one call -----------------------------------------------------------------
def parse_problem_items(text: str) -> list[str]:
    """The items of ``--problems``: comma-separated keys, stems, KernelBench ids or globs."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError(f"{text!r} names no problem; use a glob on problem keys ('level1/2*'), keys "
                         "(level1/23_Softmax) or KernelBench ids (1/23, level2/5), comma-separated")
    return items


def problem_matches(item: str, ref: ProblemRef) -> bool:
    """Whether one ``--problems`` item names ``ref``: a glob on its key, its key or stem, ``[level]L/ID``, or an id."""
    if any(c in item for c in "*?["):
        return fnmatch.fnmatchcase(ref.key, item)
    if item in (ref.key, ref.stem):
        return True
    if (m := KB_ID.fullmatch(item)) is not None:
        return ref.level == int(m.group(1)) and ref.number == int(m.group(2))
    return item.isdigit() and ref.number == int(item)


@dataclass(frozen=True)
class Selection:
    """What one call of ``kernelpilot suite`` runs out of the run's plan."""

    chosen: list[Job]  # planned jobs that match --levels and --problems (every job without them)
    todo: list[Job]  # the chosen jobs without a verdict, in plan order, at most --limit of them
    already: int  # chosen jobs that had a verdict before this call
    pending: int  # planned jobs without a verdict before this call, chosen or not

    @property
    def left(self) -> int:
        """Planned jobs still without a verdict once this call has run its jobs (not chosen, or past --limit)."""
        return self.pending - len(self.todo)


def select_jobs(jobs: list[Job], finished: set[str], levels: list[int] | None = None,
                problems: list[str] | None = None, limit: int | None = None,
                samples: list[int] | None = None) -> Selection:
    """The jobs of the plan ``jobs`` that this call runs: in one of ``levels``, named by an item of ``problems``,
    one of ``samples`` (sample 0 first: what KernelBench scores), without a verdict (``finished`` holds the job
    keys that have one), the first ``limit`` of them. A level, an item or a sample that names no planned job is
    an error: a typo would otherwise run nothing, or everything."""
    refs = list({j.problem.key: j.problem for j in jobs}.values())
    if levels is not None:
        known = sorted({r.level for r in refs if r.level is not None})
        unknown = [lv for lv in levels if lv not in known]
        if unknown:
            have = f"its levels: {', '.join(map(str, known))}" if known else "its problems are in no KernelBench level"
            raise SuiteInputError(f"--levels {','.join(map(str, levels))}: the run has no problem in level "
                                  f"{', '.join(map(str, unknown))} ({have}); pass levels of the run, or leave --levels "
                                  "out.")
    if problems is not None:
        for item in problems:
            if not any(problem_matches(item, r) for r in refs):
                examples = ", ".join(r.key for r in refs[:3]) + (", ..." if len(refs) > 3 else "")
                raise SuiteInputError(f"--problems: {item!r} matches no problem of the run ({len(refs)} problems: "
                                      f"{examples}); pass a glob on their keys ('level1/2*'), keys, or KernelBench ids "
                                      "(1/23, level2/5).")
    if samples is not None:
        have = sorted({j.sample for j in jobs})
        unknown = [s for s in samples if s not in have]
        if unknown:
            shown = ", ".join(map(str, have[:8])) + (", ..." if len(have) > 8 else "")
            raise SuiteInputError(f"--samples {','.join(map(str, samples))}: the run has no sample "
                                  f"{', '.join(map(str, unknown))} (its samples: {shown}); pass samples of the run.")
    chosen = [j for j in jobs
              if (levels is None or j.problem.level in levels)
              and (problems is None or any(problem_matches(item, j.problem) for item in problems))
              and (samples is None or j.sample in samples)]
    if not chosen:
        raise SuiteInputError("no planned job is in --levels, named by --problems and of --samples at once; "
                              "loosen one of them.")
    todo = [j for j in chosen if j.key not in finished][:limit]
    return Selection(chosen=chosen, todo=todo, already=sum(1 for j in chosen if j.key in finished),
                     pending=sum(1 for j in jobs if j.key not in finished))


# ---- where a checkout's problems came from ---------------------------------------------------------
def _level_holder(path: Path) -> Path | None:
    """The folder that holds a KernelBench checkout's level folders, when ``path`` is (in) one."""
    if path.is_file():
        return path.parent.parent if LEVEL_DIR.fullmatch(path.parent.name) else None
    for root in (path, path / "KernelBench"):
        if any(d.is_dir() and LEVEL_DIR.fullmatch(d.name) for d in root.glob("level*")):
            return root
    return path.parent if LEVEL_DIR.fullmatch(path.name) else None


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def checkout_commit(holder: Path) -> dict[str, Any]:
    """The commit of the KernelBench checkout whose level folders are in ``holder``: the checkout's root is
    ``holder`` or its parent (KernelBench's own layout, ``KernelBench/KernelBench/level1``). A git work tree
    rooted there gives ``HEAD`` (``dirty``: its problem files have uncommitted changes); else a file named
    ``COMMIT`` at the root, holding the hash (how copies without ``.git`` are made). ``commit`` is None when
    neither says (a copy nested in another repository is not taken for that repository's commit)."""
    roots = [holder, holder.parent]
    top = _git(holder, "rev-parse", "--show-toplevel")
    if top and Path(top).resolve() in roots and (head := _git(holder, "rev-parse", "HEAD")):
        dirty = bool(_git(holder, "status", "--porcelain", "--untracked-files=no", "--", "."))
        return {"root": str(Path(top).resolve()), "commit": head, "from": "git", "dirty": dirty}
    for root in roots:
        marker = root / "COMMIT"
        if marker.is_file():
            words = marker.read_text(encoding="utf-8", errors="replace").split()
            if words and COMMIT_HASH.fullmatch(words[0]):
                return {"root": str(root), "commit": words[0].lower(), "from": "COMMIT file"}
            return {"root": str(root), "commit": None, "from": "",
                    "why": f"{marker} does not start with a commit hash"}
    return {"root": str(holder), "commit": None, "from": "",
            "why": f"neither a git work tree nor a COMMIT file at {holder} or {holder.parent}"}


def kernelbench_sources(paths: list[Path]) -> list[dict[str, Any]]:
    """One entry per KernelBench checkout among ``paths`` (see ``checkout_commit``); others give none."""
    found: dict[str, dict[str, Any]] = {}
    for raw in paths:
        holder = _level_holder(Path(raw).expanduser().resolve())
        if holder is not None:
            entry = checkout_commit(holder)
            found.setdefault(entry["root"], entry)
    return list(found.values())
