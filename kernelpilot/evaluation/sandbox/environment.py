"""Environment, resource limits and filesystem paths of the confined evaluation worker.

Split from confine.py (which re-exports everything here); see confine.py for the whole picture.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelpilot.evaluation.sandbox import bytecode
from kernelpilot.redact import is_secret_name

# ---- environment -------------------------------------------------------------------------------

_ENV_EXACT = frozenset({
    "PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "LD_LIBRARY_PATH", "PYTHONPATH",
    "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONMALLOC", "PYTHONTRACEMALLOC", "PYTHONDONTWRITEBYTECODE",
    "PYTHONFAULTHANDLER", "MAX_JOBS",
    "CC", "CXX", "CUDAHOSTCXX", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG", "VIRTUAL_ENV", "CONDA_PREFIX", "NO_COLOR",
})
_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "PYTORCH_", "CUDNN_",
                 "CUBLAS_", "NCCL_DEBUG", "KERNELPILOT_",
                 "CUTE_DSL_")
# Never passed, whatever the allow-list says (checked first).
_ENV_DENY_PREFIXES = ("AWS_", "GOOGLE_", "GCLOUD", "GCP_", "AZURE_", "OPENAI", "ANTHROPIC", "LITELLM",
                      "HF_", "HUGGING", "GITHUB_", "GH_", "GITLAB", "SSH_", "GPG_", "DOCKER_", "KUBE",
                      "NPM_", "PIP_", "TWINE_", "DBUS_", "XDG_RUNTIME", "DISPLAY", "WAYLAND", "HISTFILE")


def env_name_allowed(name: str) -> bool:
    upper = name.upper()
    if is_secret_name(name) or upper.startswith(_ENV_DENY_PREFIXES):
        return False
    return name in _ENV_EXACT or name.startswith(_ENV_PREFIXES)


def scrubbed_env(base: Mapping[str, str] | None = None, home: str | Path | None = None,
                 extra: Mapping[str, str] | None = None, tmp: str | Path | None = None) -> dict[str, str]:
    """The worker's environment: allow-listed names from ``base`` (default os.environ) + ``extra``.

    Secret-looking names (``*_API_KEY``, ``*TOKEN*``, ``*SECRET*``, ``AWS_*`` ...) never pass, not
    even through ``extra`` (a ValueError then: it is a caller bug). HOME and TMPDIR are set when given.
    """
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if env_name_allowed(k)}
    for k, v in (extra or {}).items():
        if is_secret_name(k) or k.upper().startswith(_ENV_DENY_PREFIXES):
            raise ValueError(f"refusing to pass secret-looking variable {k} to the worker")
        env[k] = str(v)
    env.setdefault("PATH", os.defpath)
    if home is not None:
        env["HOME"] = str(home)
    if tmp is not None:
        env["TMPDIR"] = env["TMP"] = env["TEMP"] = str(tmp)
    return env


# ---- resource limits ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceLimits:
    """rlimits for the worker. Address space is NOT limited: CUDA reserves huge virtual ranges.

    ``processes`` is added to the number of processes + threads the user already runs, because
    RLIMIT_NPROC counts per user, not per tree; for root it is ignored by the kernel (CI as root
    gets no fork-bomb protection from it; the PID namespace kill on exit still applies).
    ``cpu_s`` accumulates over the worker's life (a warm worker reused for many candidates).
    """

    cpu_s: int | None = 3600
    open_files: int | None = 4096
    processes: int | None = 4096
    file_size_bytes: int | None = 8 << 30
    core_bytes: int | None = 0

    def settings(self) -> list[tuple[int, int]]:
        """(resource, soft limit) pairs, clamped to the current hard limits."""
        out: list[tuple[int, int]] = []
        nproc = None if self.processes is None or os.geteuid() == 0 else _user_tasks() + self.processes
        for res, value in ((resource.RLIMIT_CPU, self.cpu_s), (resource.RLIMIT_NOFILE, self.open_files),
                           (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, self.file_size_bytes),
                           (resource.RLIMIT_CORE, self.core_bytes)):
            if value is None:
                continue
            _, hard = resource.getrlimit(res)
            out.append((res, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return out

    def describe(self) -> str:
        parts = []
        if self.cpu_s is not None:
            parts.append(f"cpu={self.cpu_s}s")
        if self.open_files is not None:
            parts.append(f"nofile={self.open_files}")
        if self.processes is not None:
            parts.append(f"nproc=+{self.processes}" + (" (ignored for root)" if os.geteuid() == 0 else ""))
        if self.file_size_bytes is not None:
            parts.append(f"fsize={_gib(self.file_size_bytes)}")
        return "rlimits: " + " ".join(parts)


def _gib(n: int) -> str:
    return f"{n >> 30}GiB" if n % (1 << 30) == 0 else f"{n}B"


def _user_tasks() -> int:
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return count


# ---- read paths --------------------------------------------------------------------------------

_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys", "/etc/ld.so.cache",
                "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/passwd", "/etc/group",
                "/etc/nsswitch.conf", "/etc/localtime", "/etc/os-release", "/etc/hosts", "/etc/machine-id",
                "/etc/nvidia", "/etc/OpenCL", "/etc/vulkan")
_DEVICE_GLOBS = ("null", "zero", "full", "random", "urandom", "nvidia*", "nvidia-caps/*", "nvidia-uvm*",
                 "dri/*")


def toolchain_read_paths(home: Path | None = None) -> list[Path]:
    """Directories the worker may read and execute: system, Python, site-packages, CUDA, kernelpilot.

    sys.path entries that contain the user's home (``~`` itself, ``/``) are left out: a worker
    started from the home directory must not get read access to all of it.
    """
    home = (home or Path.home()).resolve()
    cands: list[Path] = [Path(p) for p in _SYSTEM_READ]
    cands += [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
    cands.append(Path(sys.executable).resolve().parent)
    cands += [Path(p) for p in sys.path if p]
    cands.append(Path(__file__).resolve().parents[2])  # the directory holding the kernelpilot package
    cands += _cuda_homes()
    cands += _compiler_prefixes([os.environ.get(k, "") for k in ("CC", "CXX")] + ["cc", "c++", "gcc", "g++"])
    if bytecode.env_for():  # kernelpilot's bytecode cache of torch, read-only (bytecode.py)
        cands.append(bytecode.folder())
    return _readable(cands, home)


def _readable(cands: list[Path], home: Path) -> list[Path]:
    """``cands`` resolved, existing and without repeats, leaving out ``/`` and any directory that is or holds
    the user's home."""
    out: list[Path] = []
    for p in cands:
        try:
            r = p.resolve()
        except OSError:
            continue
        if not r.exists() or r == Path("/") or r == home or home.is_relative_to(r):
            continue
        if r not in out:
            out.append(r)
    return out


def _which(name: str | None, path: str | None = None) -> Path | None:
    found = shutil.which(name.split()[0], path=path) if name and name.split() else None
    return Path(found).resolve() if found else None


def _compiler_prefixes(names: list[str | None], path: str | None = None) -> list[Path]:
    """Install prefixes of the host C/C++ compilers (torch.compile's C++ wrapper, nvcc's host compiler).

    A compiler outside /usr (``/opt/gcc/bin/gcc`` on our GPU machine) must be readable and executable
    with its ``lib``/``libexec``, or Inductor fails with PermissionError inside the sandbox.
    """
    return [found.parent.parent for name in names if (found := _which(name, path)) is not None]


def compiler_read_paths(env: Mapping[str, str]) -> list[Path]:
    """What a worker started with environment ``env`` must read and execute to run the compilers a build
    gives it later (the variables arrive with each request; Landlock is fixed at the start): the directory
    of the precompiled-header wrapper (pch.py: a script in kernelpilot's cache, written here if missing, that
    a compile inside the worker runs; without it 'Permission denied' on the H200, 2026-12-04), the directory
    of ``$CXX`` and the install prefix of the compiler the wrapper runs."""
    from kernelpilot.evaluation.build import pch

    wrapper = pch.compiler_env(dict(env))
    path = env.get("PATH")
    dirs = [found.parent for name in (wrapper.get("CXX"), env.get("CXX")) if (found := _which(name, path)) is not None]
    real = _compiler_prefixes([wrapper.get("KERNELPILOT_REAL_CXX"), env.get("KERNELPILOT_REAL_CXX")], path)
    return _readable(dirs + real, Path.home().resolve())


def _cuda_homes() -> list[Path]:
    homes = [Path(v) for k in ("CUDA_HOME", "CUDA_PATH") if (v := os.environ.get(k))]
    try:
        from kernelpilot.toolkit import (
            find_cuda_home,  # the build part's resolver, when present
        )

        homes.append(Path(find_cuda_home()))
    except Exception:  # noqa: BLE001 - absent or failing: fall back to the usual places
        pass
    homes += [Path("/usr/local/cuda"), Path("/opt/cuda")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(Path(nvcc).resolve().parent.parent)
    return homes


def device_paths() -> list[Path]:
    out: list[Path] = []
    for pattern in _DEVICE_GLOBS:
        out += sorted(Path("/dev").glob(pattern))
    return out
