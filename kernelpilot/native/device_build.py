"""A kernel edit's build: device code only (``nvcc -cubin``), the edited .cu files alone, in parallel parts.

After a full build (torch's ninja build of binding.cpp and every .cu, recorded by records.py), an edit that
touches only device code (a .cu file, or a header only .cu files include) needs no host compile and no link:
each affected .cu is compiled with the full build's exact nvcc command, with ``-cubin`` in place of ``-c``,
split into parts by its explicit instantiations (each part a copy of the file with the other instantiations
blanked, line numbers kept, ``#line`` naming the real file), and the parts compile at once. The worker then
loads the cubins into the library of the full build (kernelpilot/launch.h replaces each kernel by the one of
the same name). A part's kernels are the same machine code as the whole file's (identity.py checks it for
every edit; the tests check it for every shipped example).

Anything else takes the full build: binding.cpp or a file it includes changed, a .cu file was added or
removed, a .cu file has host code of its own, binding.cpp calls the runtime on a kernel directly, or a
kernel of the full build is missing from the new code.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from kernelpilot.native import elf
from kernelpilot.native.records import DEVICE_FILE, DeviceBuild, FullBuild, read_full, write
from kernelpilot.native.code_text import code_digests
from kernelpilot.native.sources import host_launch_problem, instances, keep_only, local_includes

PARTS_DIR = "device"
MAX_PARTS = 16
NO_FULL_BUILD = "no full build of this candidate yet"
# options of the full build's command that name its output or dependency file, dropped for a part
_DROP_WITH_VALUE = {"-o", "-MF", "--dependency-output", "-MT", "-MQ"}
_DEPENDENCY_FLAGS = {"-MD", "-MMD", "--generate-dependencies-with-compile", "-MP"}


@dataclass
class Part:
    """One ``nvcc -cubin`` of (part of) one .cu file."""

    source: Path  # the candidate's .cu file
    copy: Path  # the file compiled: a copy with the other parts' instantiations blanked (or the file itself)
    cubin: Path
    argv: list[str]
    instances: int


@dataclass
class DevicePlan:
    full: FullBuild
    sources: dict[str, str]  # digests of every local file now
    affected: list[Path]  # .cu files whose device code differs from the full build's
    parts: list[Part] = field(default_factory=list)

    @property
    def missing(self) -> list[Part]:
        return [p for p in self.parts if not p.cubin.is_file()]

    def record(self) -> DeviceBuild:
        parts: dict[str, list[str]] = {}
        for p in self.parts:
            parts.setdefault(str(p.source), []).append(str(p.cubin))
        return DeviceBuild(library=self.full.library, fingerprint=self.full.fingerprint, sources=self.sources,
                           cubins=[str(p.cubin) for p in self.parts], parts=parts)


def parallel_parts(env: dict[str, str] | None = None) -> int:
    """How many parts a file may be split into: $KERNELPILOT_DEVICE_PARTS, else one per core but one."""
    env = dict(os.environ) if env is None else env
    if env.get("KERNELPILOT_DEVICE_PARTS", "").isdigit():
        return max(1, int(env["KERNELPILOT_DEVICE_PARTS"]))
    return max(1, min(MAX_PARTS, (os.cpu_count() or 1) - 1))


def without_outputs(full_argv: list[str]) -> list[str]:
    """The full build's nvcc command without its output and dependency-file options (``-o``, ``-MD -MF``, ...)."""
    out: list[str] = []
    skip = False
    for arg in full_argv:
        if skip:
            skip = False
        elif arg in _DROP_WITH_VALUE:
            skip = True
        elif arg not in _DEPENDENCY_FLAGS:
            out.append(arg)
    return out


def cubin_argv(full_argv: list[str], copy: Path, cubin: Path, include_dir: Path) -> list[str]:
    """The full build's nvcc command, compiling ``copy`` to ``cubin`` (device code only)."""
    out: list[str] = []
    source_seen = False
    for arg in without_outputs(full_argv):
        if arg == "-c":
            continue
        if not arg.startswith("-") and arg.endswith(".cu") and not source_seen and out:
            source_seen = True  # the full build's source: replaced by the copy below
            continue
        out.append(arg)
    return [*out, f"-I{include_dir}", "-cubin", str(copy), "-o", str(cubin)]


def plan(directory: Path, build_dir: Path, *, parts: int) -> DevicePlan | str:
    """What a device-only build of ``directory`` must compile, or why it needs a full build."""
    full = read_full(build_dir)
    if full is None:
        return NO_FULL_BUILD
    if not Path(full.library).is_file():
        return "the full build's library is gone"
    kernels = sorted(p.resolve() for p in directory.glob("*.cu") if p.is_file())
    if [str(p) for p in kernels] != sorted(full.commands):
        return "a .cu file was added or removed"
    binding = directory.resolve() / "binding.cpp"
    binding_files = [binding, *local_includes(binding, directory)]
    if [str(p) for p in binding_files] != full.binding_files:
        return "binding.cpp includes other files"
    closures = {cu: local_includes(cu, directory) for cu in kernels}
    every = sorted({*binding_files, *kernels, *(p for ps in closures.values() for p in ps)})
    now, code = code_digests(every, code_of=binding_files)  # the code text of binding.cpp's files alone
    changed_binding = [p for p in full.binding_files if now.get(p) != full.sources.get(p)]
    # a file of binding.cpp's whose comments alone changed leaves the host code as the full build compiled it
    host_changed = [Path(p).name for p in changed_binding if code.get(p) != full.binding_code.get(p, "")]
    if host_changed:
        return f"{', '.join(host_changed)} changed (host code)"
    problem = host_launch_problem(binding, directory)
    if problem:
        return problem
    affected = [cu for cu in kernels
                if [str(p) for p in closures[cu]] != full.kernel_files.get(str(cu))
                or any(now.get(str(p)) != full.sources.get(str(p)) for p in [cu, *closures[cu]])]
    for cu in affected:
        if full.host_code.get(str(cu)):
            names = _host_names(full.host_code[str(cu)])
            return f"{cu.name} has host code of its own ({names}); move it to binding.cpp"
    result = DevicePlan(full=full, sources=now, affected=affected)
    folder = build_dir / PARTS_DIR
    for cu in affected:
        result.parts += parts_of(cu, closures[cu], full.commands[str(cu)], folder, parts)
    return result


def _host_names(names: list[str]) -> str:
    """Up to three of a .cu's host functions, C names first (a C++ name is shown mangled), and how many more."""
    shown = sorted(names, key=lambda n: n.startswith("_Z"))[:3]
    return ", ".join(shown) + (f" and {len(names) - len(shown)} more" if len(names) > len(shown) else "")


def parts_of(cu: Path, closure: list[Path], full_argv: list[str], folder: Path, parts: int) -> list[Part]:
    text = cu.read_text(encoding="utf-8", errors="replace")
    found = instances(text)
    count = min(len(found.spans), parts) if found.splittable else 1
    key = hashlib.sha256()
    for piece in (shlex.join(full_argv), text, *(p.read_text(errors="replace") for p in closure), str(count)):
        key.update(piece.encode() + b"\0")
    stem = f"{cu.stem}-{key.hexdigest()[:16]}"
    out = []
    for k in range(count):
        keep = {i for i in range(len(found.spans)) if i % count == k}
        copy = folder / f"{stem}-{k}.cu" if count > 1 else cu
        cubin = folder / f"{stem}-{k}.cubin"
        out.append(Part(source=cu, copy=copy, cubin=cubin, argv=cubin_argv(full_argv, copy, cubin, cu.parent),
                        instances=len(keep) if count > 1 else len(found.spans)))
        if count > 1 and not copy.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            tmp = copy.with_suffix(".tmp")
            tmp.write_text(f'#line 1 "{cu}"\n' + keep_only(text, found.spans, keep))
            os.replace(tmp, copy)
    return out


def ninja_file(plan_: DevicePlan, build_dir: Path) -> Path:
    """A ninja file that compiles the plan's missing parts (all at once, ninja's -j)."""
    folder = build_dir / PARTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["ninja_required_version = 1.3", "rule cubin", "  command = $cmd", ""]
    for part in plan_.missing:
        target = _escape_path(str(part.cubin))
        lines += [f"build {target}: cubin {_escape_path(str(part.copy))}",
                  f"  cmd = {shlex.join(part.argv).replace('$', '$$')}", ""]
    path = folder / "device.ninja"
    path.write_text("\n".join(lines))
    return path


def _escape_path(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def missing_kernels(plan_: DevicePlan) -> list[str]:
    """Kernels the full build's host code launches that none of the new cubins defines."""
    missing: list[str] = []
    for cu in plan_.affected:
        have: set[str] = set()
        for part in plan_.parts:
            if part.source == cu and part.cubin.is_file():
                have.update(elf.kernels(part.cubin))
        missing += [k for k in plan_.full.stubs.get(str(cu), []) if k not in have]
    return missing


def finish(plan_: DevicePlan, build_dir: Path, *, keep: int = 96) -> DeviceBuild:
    """Write the device-only build's record; keep the newest ``keep`` files of earlier edits' parts."""
    record = plan_.record()
    write(build_dir / DEVICE_FILE, record)
    current = {str(p.cubin) for p in plan_.parts} | {str(p.copy) for p in plan_.parts}
    files = sorted((f for f in (build_dir / PARTS_DIR).glob("*-*-*.*") if str(f) not in current),
                   key=lambda f: f.stat().st_mtime_ns, reverse=True)
    for old in files[keep:]:
        old.unlink(missing_ok=True)
    return record
