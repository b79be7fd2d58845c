"""The two records a native candidate's build directory keeps for the device-only kernel-edit build.

- ``kernelpilot-full.json`` (:class:`FullBuild`), written after each full build (torch's ninja build of
  binding.cpp and every .cu): a snapshot of the library it made, the digests of every local file it read,
  the nvcc command of each .cu, the kernels each .cu's host half can launch, and any other host code there.
- ``kernelpilot-device.json`` (:class:`DeviceBuild`), written after each device-only build: the library
  (the full build's snapshot), the cubins that replace its kernels, and the digests of the sources they were
  compiled from. kernelpilot's worker uses it only while every digest matches the files on disk.

No torch import here.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelpilot.extension_reload import file_fingerprint
from kernelpilot.native import elf
from kernelpilot.native.sources import local_includes

FULL_FILE = "kernelpilot-full.json"
DEVICE_FILE = "kernelpilot-device.json"
FORMAT = 1
# Host functions nvcc itself puts in a .cu's host object (registration of the device code).
_NVCC_HOST = ("_ZL24__sti____cudaRegisterAllv", "_ZL26__cudaUnregisterBinaryUtilv", "__sti____cudaRegisterAll",
              "__cudaUnregisterBinaryUtil", "__nv_", "__cuda", "__device_stub_")


@dataclass
class FullBuild:
    library: str  # the snapshot under <build dir>/full/
    fingerprint: str
    sources: dict[str, str]  # every local file the build read -> sha256
    binding_files: list[str]  # binding.cpp and the local files it includes
    kernel_files: dict[str, list[str]]  # each .cu -> the local files it includes
    commands: dict[str, list[str]]  # each .cu -> its nvcc argv in build.ninja
    stubs: dict[str, list[str]]  # each .cu -> the kernels its host half launches (mangled names)
    host_code: dict[str, list[str]]  # each .cu -> host functions other than kernel stubs (no device-only build)
    undefined: list[str] = field(default_factory=list)  # what the library needs from other libraries
    # binding.cpp and its local files -> sha256 of their code without comments (code_text.py), as built
    binding_code: dict[str, str] = field(default_factory=dict)
    format: int = FORMAT


@dataclass
class DeviceBuild:
    library: str
    fingerprint: str
    sources: dict[str, str]  # every local file -> sha256 when the cubins were compiled
    cubins: list[str] = field(default_factory=list)
    parts: dict[str, list[str]] = field(default_factory=dict)  # each edited .cu -> its parts' cubins
    format: int = FORMAT


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def read_full(build_dir: Path) -> FullBuild | None:
    data = _read(build_dir / FULL_FILE)
    try:
        return FullBuild(**data) if data else None
    except TypeError:
        return None


def read_device(build_dir: Path) -> DeviceBuild | None:
    data = _read(build_dir / DEVICE_FILE)
    try:
        return DeviceBuild(**data) if data else None
    except TypeError:
        return None


def write(path: Path, record: FullBuild | DeviceBuild) -> None:
    """Atomically (the worker may read it while a build writes)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".record-")
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(record), fh, indent=1)
    os.replace(tmp, path)


def clear_device(build_dir: Path) -> None:
    (build_dir / DEVICE_FILE).unlink(missing_ok=True)


def ninja_commands(build_dir: Path) -> dict[str, list[str]]:
    """Source path -> the nvcc argv torch's build.ninja compiles it with (variables expanded)."""
    try:
        text = (build_dir / "build.ninja").read_text()
    except OSError:
        return {}
    variables: dict[str, str] = {}
    rule_command = ""
    out: dict[str, list[str]] = {}
    in_cuda_rule = False
    for line in text.splitlines():
        if line.startswith("rule "):
            in_cuda_rule = line.split()[1] == "cuda_compile"
            continue
        if in_cuda_rule and line.strip().startswith("command ="):
            rule_command = line.split("=", 1)[1].strip()
            continue
        if line and not line.startswith((" ", "\t")):
            in_cuda_rule = False
        if "=" in line and not line.startswith(("build ", " ", "\t", "rule ")):
            key, value = line.split("=", 1)
            variables[key.strip()] = value.strip()
        if line.startswith("build ") and ": cuda_compile " in line:
            target, source = line[6:].split(": cuda_compile ", 1)
            source = source.strip().replace("$ ", " ").replace("$:", ":")
            command = rule_command
            for key in ("nvcc", "cuda_cflags", "cuda_post_cflags"):
                command = command.replace(f"${key}", variables.get(key, ""))
            target = target.strip()  # "$out.d" first: it is "-MF $out.d", a flag's value that must stay one
            command = (command.replace("$out.d", f"{target}.d").replace("$in", shlex.quote(source))
                       .replace("$out", target))
            out[source] = [a for a in shlex.split(command)]
    return out


def stubs_and_host_code(obj: Path) -> tuple[list[str], list[str]]:
    """(kernel stubs, other host functions) a .cu's host object defines: a stub is a function named as a kernel
    of the device code nvcc embedded in the object; anything else but nvcc's own registration is host code."""
    cubins = elf.embedded_cubins(obj)
    if not cubins:
        raise elf.ElfError(f"{obj.name}: no uncompressed device code to read the kernels from")
    # a .cu of host code alone (cuBLASLt calls) embeds a cubin without kernels: every function it defines is host code
    entries = {name for cubin in cubins for name in elf.kernels(cubin)}
    stubs, other = [], []
    for symbol in elf.defined_functions(obj):
        if symbol.name.startswith(_NVCC_HOST) or "__device_stub__" in symbol.name or symbol.name.endswith(".cold"):
            continue  # nvcc's registration, and the stub's body (mangled: _Z33__device_stub__Z11fill...)
        (stubs if symbol.name in entries else other).append(symbol.name)
    return stubs, other


def full_build_files(directory: Path, sources: list[Path]) -> list[Path]:
    """Every file a full build of ``sources`` (binding.cpp first) reads from ``directory``: the sources and their
    local includes."""
    binding, kernels = sources[0], [s for s in sources if s.suffix == ".cu"]
    every = {binding, *kernels, *local_includes(binding, directory)}
    every.update(p for cu in kernels for p in local_includes(cu, directory))
    return sorted(every)


def record_full_build(directory: Path, build_dir: Path, library: Path, sources: list[Path],
                      before: dict[str, str], before_code: dict[str, str] | None = None) -> FullBuild | None:
    """After a full build: snapshot its library and write what the next device-only build needs. ``before``: the
    digest of ``full_build_files`` taken as the build started, recorded as the sources it built. A file saved during
    the build (the library holds either version) then differs from the record, and the next save compiles it again;
    a digest taken now would call the library current and the next save would run the old kernel. ``before_code``:
    the digests of their code without comments, read with ``before`` (code_text.code_digests); without it, any
    change to binding.cpp's files takes a full build."""
    binding, kernels = sources[0], [s for s in sources if s.suffix == ".cu"]
    commands = ninja_commands(build_dir)
    stubs: dict[str, list[str]] = {}
    host_code: dict[str, list[str]] = {}
    for cu in kernels:
        obj = build_dir / f"{cu.stem}.cuda.o"
        try:
            stubs[str(cu)], host_code[str(cu)] = stubs_and_host_code(obj)
        except elf.ElfError:
            return None
    if set(commands) != {str(cu) for cu in kernels}:
        return None
    fingerprint = file_fingerprint(library)
    snapshots = build_dir / "full"
    snapshots.mkdir(exist_ok=True)
    snapshot = snapshots / f"{library.stem}-{fingerprint[:16]}{library.suffix}"
    if not snapshot.exists():
        tmp = snapshot.with_suffix(".tmp")
        shutil.copy2(library, tmp)
        os.replace(tmp, snapshot)
    for old in snapshots.glob(f"{library.stem}-*{library.suffix}"):
        if old != snapshot:
            old.unlink(missing_ok=True)  # a worker that mapped it keeps its mapping
    binding_files = [binding, *local_includes(binding, directory)]
    kernel_files = {str(cu): [str(p) for p in local_includes(cu, directory)] for cu in kernels}
    record = FullBuild(
        library=str(snapshot), fingerprint=fingerprint, sources=before,
        binding_files=[str(p) for p in binding_files], kernel_files=kernel_files, commands=commands,
        stubs=stubs, host_code=host_code, undefined=elf.undefined_dynamic(library),
        binding_code={str(p): (before_code or {}).get(str(p), "") for p in binding_files})
    write(build_dir / FULL_FILE, record)
    clear_device(build_dir)
    return record
