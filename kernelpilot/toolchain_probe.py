"""Toolchain choices made by trying them: which linker a build uses, once per toolchain identity.

A choice is never made because a binary is on PATH. ``ld.gold`` on PATH once made every native build
on the GPU image fail to link (gold there could not find the compiler's ``libstdc++.so``): a choice is
used only after a probe did exactly what builds do with it (here: link a tiny shared library with the
build's own link flags). The answers are cached in one JSON file per machine, keyed by the toolchain's
identity (compiler, linkers, nvcc and torch: path, size and mtime of each binary, torch's version), so
a changed compiler, linker, toolkit or torch is probed again; the probe costs about a second once.

No torch import here (the build step's fast path runs without it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

from kernelpilot.errors import ToolchainError
from kernelpilot.toolkit import find_cuda_home

FORMAT = 2  # bump when what a probe checks changes: every machine probes again
GOLD_FLAGS = ("-fuse-ld=gold",)
# The link of the extension (the .so against torch's libraries) is part of every plain build: GNU gold
# does it in 0.20-0.24 s where the default BFD linker takes 0.37-0.52 s (softmax example, 2-core machine).
# Only the host library's layout differs: the objects, and so the kernels timed, are the same.
LINKERS: dict[str, tuple[str, ...]] = {"gold": GOLD_FLAGS, "default": ()}
PROBE_TIMEOUT_S = 60.0
# nvcc options builds use when this nvcc accepts them (an older nvcc rejects an option it does not know):
# -t0 (threads for nvcc's steps), -static-global-template-stub=false (binding.cpp launches kernel templates
# instantiated in a .cu file; without the option, nvcc before 12.8 gives those stubs weak linkage anyway).
OPTIONAL_NVCC_FLAGS = ("-t0", "-static-global-template-stub=false")
HANDED = "KERNELPILOT_TOOLCHAIN_CHOICES"  # a probe's answer handed to a process as JSON (``choices``, ``handed``)


@dataclass
class LinkerProbe:
    """What trying one linker gave."""

    name: str
    flags: list[str]
    ok: bool
    seconds: float = 0.0
    error: str = ""


@dataclass
class ToolchainChoices:
    """The probed answer for one toolchain identity."""

    identity: str
    linker: str  # the name of the chosen linker ("gold", "default")
    linker_flags: list[str]
    probes: list[LinkerProbe] = field(default_factory=list)
    nvcc_flags: list[str] = field(default_factory=list)  # the OPTIONAL_NVCC_FLAGS this nvcc accepted
    nvcc_refused: dict[str, str] = field(default_factory=dict)  # the others, with nvcc's words
    probed_at: float = 0.0

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> "ToolchainChoices":
        probes = [LinkerProbe(**p) for p in data.get("probes", []) or []]  # type: ignore[union-attr]
        return cls(identity=str(data["identity"]), linker=str(data["linker"]),
                   linker_flags=[str(f) for f in data.get("linker_flags", []) or []],  # type: ignore[union-attr]
                   probes=probes, nvcc_flags=[str(f) for f in data.get("nvcc_flags", []) or []],  # type: ignore[union-attr]
                   nvcc_refused=dict(data.get("nvcc_refused", {}) or {}),  # type: ignore[call-overload]
                   probed_at=float(data.get("probed_at", 0.0) or 0.0))  # type: ignore[arg-type]


def cache_file(env: Mapping[str, str] | None = None) -> Path:
    """$KERNELPILOT_TOOLCHAIN_CACHE, else ``<user cache>/kernelpilot/toolchain.json``."""
    env = os.environ if env is None else env
    if env.get("KERNELPILOT_TOOLCHAIN_CACHE"):
        return Path(env["KERNELPILOT_TOOLCHAIN_CACHE"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "toolchain.json"


def compiler(env: Mapping[str, str]) -> str:
    """The C++ compiler a build links with: the real one behind kernelpilot's wrapper, else $CXX, else c++."""
    name = env.get("KERNELPILOT_REAL_CXX") or env.get("CXX") or "c++"
    return shutil.which(name, path=env.get("PATH") or os.defpath) or name


def nvcc_path(env: Mapping[str, str]) -> str | None:
    """The nvcc builds run: the toolkit's (toolkit.find_cuda_home), else the first on PATH."""
    try:
        return str(find_cuda_home(env) / "bin" / "nvcc")
    except ToolchainError:
        return shutil.which("nvcc", path=env.get("PATH") or os.defpath)


def torch_lib_dir() -> Path | None:
    spec = find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


def identity(env: Mapping[str, str]) -> str:
    """A fingerprint of everything a probe's answer depends on, read without running anything."""
    path = env.get("PATH") or os.defpath
    parts: list[str] = [f"format={FORMAT}"]
    for tool in (compiler(env), "ld", "ld.gold", "ld.bfd"):
        found = shutil.which(tool, path=path) if not os.path.isabs(tool) else tool
        parts.append(f"{tool}={_stat(found)}")
    parts.append(f"nvcc={_stat(nvcc_path(env))}")
    parts.append(f"cuda_home={env.get('CUDA_HOME', '')}")
    try:
        parts.append(f"torch={version('torch')}")
    except PackageNotFoundError:
        parts.append("torch=")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def _stat(path: str | None) -> str:
    if not path:
        return "absent"
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return "absent"
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def link_flags(env: Mapping[str, str]) -> list[str]:
    """The link line of an extension build, less the linker choice (torch.utils.cpp_extension's, for CUDA)."""
    flags = ["-shared"]
    lib = torch_lib_dir()
    if lib is not None:
        flags += [f"-L{lib}", "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch", "-ltorch_python"]
    home = env.get("CUDA_HOME")
    if home:
        flags += [f"-L{Path(home) / 'lib64'}", "-lcudart"]
    return flags


def probe_linker(name: str, env: Mapping[str, str], workdir: Path) -> LinkerProbe:
    """Link a tiny shared library with the build's link flags and linker ``name``."""
    flags = list(LINKERS[name])
    cxx = compiler(env)
    source = workdir / "kp_probe.cpp"
    obj = workdir / "kp_probe.o"
    if not obj.is_file():
        source.write_text('extern "C" int kp_probe_answer() { return 42; }\n')
        compiled = _run([cxx, "-fPIC", "-c", str(source), "-o", str(obj)], env)
        if compiled:
            return LinkerProbe(name=name, flags=flags, ok=False, error=f"the compiler failed: {compiled}")
    out = workdir / f"kp_probe_{name}.so"
    start = time.monotonic()
    error = _run([cxx, str(obj), *link_flags(env), *flags, "-o", str(out)], env)
    seconds = round(time.monotonic() - start, 3)
    if not error and not out.is_file():
        error = "the linker reported success but wrote no library"
    return LinkerProbe(name=name, flags=flags, ok=not error, seconds=seconds, error=error)


def _run(argv: list[str], env: Mapping[str, str]) -> str:
    """'' on success, else the command's first error lines."""
    try:
        proc = subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"[:400]
    if proc.returncode == 0:
        return ""
    text = (proc.stderr or proc.stdout).strip()
    lines = [ln for ln in text.splitlines() if "error" in ln.lower() or "cannot" in ln.lower()] or text.splitlines()
    return (" | ".join(lines[:3]) or f"exit status {proc.returncode}")[:400]


def probe_nvcc_flags(env: Mapping[str, str], workdir: Path) -> tuple[list[str], dict[str, str]]:
    """Which OPTIONAL_NVCC_FLAGS this nvcc accepts (each tried on an empty device compile)."""
    nvcc = nvcc_path(env)
    if nvcc is None:
        return [], {flag: "no nvcc found" for flag in OPTIONAL_NVCC_FLAGS}
    source = workdir / "kp_probe.cu"
    source.write_text("__global__ void kp_probe_kernel() {}\n")
    accepted, refused = [], {}
    for flag in OPTIONAL_NVCC_FLAGS:
        error = _run([nvcc, flag, "-cubin", str(source), "-o", str(workdir / "kp_probe.cubin")], env)
        if error:
            refused[flag] = error
        else:
            accepted.append(flag)
    return accepted, refused


def probe(env: Mapping[str, str]) -> ToolchainChoices:
    """Try every linker (choose gold when it links, else the compiler's default, which must link too) and the
    optional nvcc flags."""
    with tempfile.TemporaryDirectory(prefix="kp-toolchain-") as tmp:
        probes = [probe_linker(name, env, Path(tmp)) for name in LINKERS]
        accepted, refused = probe_nvcc_flags(env, Path(tmp))
    chosen = next((p for p in probes if p.ok), None)
    return ToolchainChoices(
        identity=identity(env), linker=chosen.name if chosen else "default",
        linker_flags=list(chosen.flags) if chosen else [], probes=probes, nvcc_flags=accepted,
        nvcc_refused=refused, probed_at=time.time())


def choices(env: Mapping[str, str] | None = None, *, refresh: bool = False) -> ToolchainChoices:
    """The cached choices for this toolchain, probing (and caching) when there are none or ``refresh``. ``HANDED``
    in ``env`` (the evaluation worker: the build step's answer, for the same identity) is used as it is: the
    worker may not read the cache file, and probing there cost a cold verdict 1.1 s (H100, 2026-12-06)."""
    env = os.environ if env is None else env
    key = identity(env)
    handed = env.get(HANDED, "")
    if handed and not refresh:
        try:
            answer = ToolchainChoices.from_dict(json.loads(handed))
            if answer.identity == key:
                return answer
        except (KeyError, TypeError, ValueError):
            pass
    path = cache_file(env)
    table = _read(path)
    if not refresh and key in table:
        try:
            return ToolchainChoices.from_dict(table[key])
        except (KeyError, TypeError, ValueError):
            pass
    answer = probe(env)
    table[key] = asdict(answer)
    _write(path, table)
    return answer


def linker_flags(env: Mapping[str, str] | None = None) -> list[str]:
    """The flags of the linker the probe chose. ``KERNELPILOT_LINKER=default`` skips gold without probing;
    ``KERNELPILOT_LINKER=gold`` asks for gold, still only if it passed its probe."""
    env = os.environ if env is None else env
    wanted = env.get("KERNELPILOT_LINKER", "").strip().lower()
    if wanted in ("default", "bfd", "0"):
        return []
    answer = choices(env)
    return list(answer.linker_flags)


def nvcc_flags(env: Mapping[str, str] | None = None) -> list[str]:
    """The optional nvcc flags this toolchain accepted, in OPTIONAL_NVCC_FLAGS order."""
    return list(choices(os.environ if env is None else env).nvcc_flags)


def _read(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, table: dict[str, dict[str, object]]) -> None:
    """Atomically, keeping the newest 16 identities (a machine rarely has more toolchains than that)."""
    newest = sorted(table.items(), key=lambda kv: float(kv[1].get("probed_at", 0) or 0), reverse=True)[:16]  # type: ignore[arg-type]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".toolchain-")
        with os.fdopen(fd, "w") as fh:
            json.dump(dict(newest), fh, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache: the next build probes again


def handed(env: Mapping[str, str]) -> str:
    """The choices for ``env``'s toolchain as ``HANDED`` carries them to another process (the cached answer; a
    probe when there is none)."""
    return json.dumps(asdict(choices(env)))
