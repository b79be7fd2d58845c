"""The CUDA toolchain: where the toolkit lives, which GPU architecture to build for, and the env to build with.

torch's extension builder guesses CUDA_HOME from the directory above the first ``nvcc`` on PATH; on
machines where that ``nvcc`` is a wrapper script (``/usr/local/bin/nvcc`` that execs the real one)
the guess is ``/usr/local`` and the link fails with ``cannot find -lcudart``. Everything that builds
kernels therefore takes CUDA_HOME from :func:`find_cuda_home` here. No torch import in this module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from kernelpilot.errors import ToolchainError

DEFAULT_CUDA_HOMES: tuple[Path, ...] = (Path("/usr/local/cuda"),)
DEFAULT_ARCH = "sm_90"

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d{1,2})\.?(\d)([af]?)$")
_EXEC_NVCC_RE = re.compile(r"""(?:^|[\s"'=])(/[^\s"';|&]*?/bin/nvcc)(?=$|[\s"';|&])""", re.MULTILINE)
_DRYRUN_TOP_RE = re.compile(r"^#\$ (?:TOP|_HERE_)=(\S+)$", re.MULTILINE)


def is_cuda_home(path: Path) -> bool:
    """A toolkit root: ``bin/nvcc`` and the runtime header are both there."""
    if not (path / "bin" / "nvcc").is_file():
        return False
    return (path / "include" / "cuda_runtime.h").is_file() or any(
        path.glob("targets/*/include/cuda_runtime.h")
    )


def find_cuda_home(
    env: Mapping[str, str] | None = None,
    *,
    default_homes: Iterable[Path] = DEFAULT_CUDA_HOMES,
) -> Path:
    """The CUDA toolkit root: $CUDA_HOME, then /usr/local/cuda, then the install behind ``nvcc`` on PATH.

    ``env`` defaults to ``os.environ``; ``default_homes`` exists so tests can leave /usr/local/cuda out.
    Raises ToolchainError naming every place tried.
    """
    env = os.environ if env is None else env
    tried: list[str] = []

    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var)
        if not value:
            continue
        home = Path(value).expanduser()
        if is_cuda_home(home):
            return home.resolve()
        tried.append(f"${var}={value} (no bin/nvcc and include/cuda_runtime.h there)")

    for home in default_homes:
        if is_cuda_home(home):
            return home.resolve()
        tried.append(f"{home} (not a CUDA toolkit)")

    nvcc = shutil.which("nvcc", path=env.get("PATH", ""))
    if nvcc is None:
        tried.append("nvcc on PATH (not found)")
    else:
        home = _home_behind_nvcc(Path(nvcc), env)
        if home is not None:
            return home
        tried.append(f"{nvcc} on PATH (could not tell which toolkit it runs)")

    raise ToolchainError(
        "No CUDA toolkit found (tried " + "; ".join(tried) + "): install the CUDA toolkit or set "
        "CUDA_HOME to its root, the directory that holds bin/nvcc."
    )


def _home_behind_nvcc(nvcc: Path, env: Mapping[str, str]) -> Path | None:
    """The toolkit root that ``nvcc`` (a binary, a symlink or a wrapper script) really runs."""
    real = nvcc.resolve()
    if is_cuda_home(real.parent.parent):
        return real.parent.parent
    # A wrapper script: look for the absolute path of the nvcc it execs.
    try:
        head = real.read_bytes()[:65536]
    except OSError:
        head = b""
    if head.startswith(b"#!"):
        text = head.decode("utf-8", "replace")
        for match in _EXEC_NVCC_RE.finditer(text):
            target = Path(match.group(1))
            if target.resolve() != real and is_cuda_home(target.resolve().parent.parent):
                return target.resolve().parent.parent
    # Ask nvcc itself: its dry run prints the directory it runs from.
    try:
        proc = subprocess.run(
            [str(nvcc), "-v", "--dryrun", "-c", "kernelpilot_probe.cu"],
            capture_output=True,
            text=True,
            timeout=20,
            env=dict(env),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    for match in _DRYRUN_TOP_RE.finditer(proc.stdout + proc.stderr):
        top = Path(match.group(1)).resolve()
        for candidate in (top, top.parent):
            if is_cuda_home(candidate):
                return candidate
    return None


def normalize_arch(arch: str) -> str:
    """``"sm_90"``, ``"90"``, ``"9.0"``, ``"compute_90a"`` -> ``"sm_90"`` / ``"sm_90a"``."""
    match = _ARCH_RE.match(arch.strip().lower())
    if match is None:
        raise ToolchainError(
            f"Unknown GPU architecture {arch!r}: use a form like sm_90 or sm_90a (KERNELPILOT_ARCH)."
        )
    major, minor, suffix = match.groups()
    return f"sm_{major}{minor}{suffix}"


def arch_capability(arch: str) -> str:
    """``"sm_90a"`` -> ``"9.0a"`` (the TORCH_CUDA_ARCH_LIST spelling)."""
    digits = normalize_arch(arch)[3:]
    suffix = digits[-1] if digits[-1].isalpha() else ""
    number = digits.rstrip("af")
    return f"{number[:-1]}.{number[-1]}{suffix}"


def gencode_flags(arch: str) -> list[str]:
    """nvcc flags that compile SASS for exactly ``arch``."""
    digits = normalize_arch(arch)[3:]
    return [f"-gencode=arch=compute_{digits},code=sm_{digits}"]


def detect_arch(env: Mapping[str, str] | None = None, *, arch_specific: bool = False) -> str:
    """The architecture to build for: $KERNELPILOT_ARCH, else the visible GPU (NVML), else sm_90.

    ``arch_specific`` asks for the architecture-specific variant (``sm_90a``: wgmma, setmaxnreg) on
    GPUs of compute capability 9.0 and newer; an explicit $KERNELPILOT_ARCH wins over it.
    """
    env = os.environ if env is None else env
    forced = env.get("KERNELPILOT_ARCH", "").strip()
    if forced:
        return normalize_arch(forced)
    capability = gpu_capability(env)
    arch = DEFAULT_ARCH if capability is None else f"sm_{capability[0]}{capability[1]}"
    if arch_specific and capability is not None and capability[0] >= 9:
        arch += "a"
    elif arch_specific and capability is None:
        arch += "a"
    return arch


def gpu_capability(env: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """Compute capability of the first visible GPU through NVML, or None without a GPU or NVML."""
    env = os.environ if env is None else env
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no driver, no GPU
        return None
    try:
        visible = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if visible.startswith(("GPU-", "MIG-")):
            handle = pynvml.nvmlDeviceGetHandleByUUID(visible)
        elif visible.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(visible))
        elif visible in ("", "all"):
            if pynvml.nvmlDeviceGetCount() == 0:
                return None
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        else:  # "-1", "none", ...: no GPU is visible to CUDA
            return None
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return int(major), int(minor)
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def toolchain_env(
    arch: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    cuda_home: Path | None = None,
) -> dict[str, str]:
    """Environment additions for a build: CUDA_HOME, PATH with its bin first, TORCH_CUDA_ARCH_LIST, MAX_JOBS."""
    env = os.environ if env is None else env
    home = cuda_home if cuda_home is not None else find_cuda_home(env)
    arch = normalize_arch(arch) if arch else detect_arch(env)
    bin_dir = str(home / "bin")
    path_parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bin_dir]
    return {
        "CUDA_HOME": str(home),
        "PATH": os.pathsep.join([bin_dir, *path_parts]),
        "TORCH_CUDA_ARCH_LIST": arch_capability(arch),
        "MAX_JOBS": env.get("MAX_JOBS") or str(max(1, os.cpu_count() or 1)),
        **wheel_library_env(home, env),
    }


def wheel_library_env(home: Path, env: Mapping[str, str]) -> dict[str, str]:
    """CPATH/LIBRARY_PATH additions for CUDA libraries the toolkit lacks but torch's pip wheels ship.

    A toolkit installed for nvcc alone often has no cuBLAS/cuBLASLt headers or libraries, while the
    ``nvidia-*`` wheels torch depends on carry both (``site-packages/nvidia/cu13/{include,lib}``).
    Only added when the toolkit itself has no ``cublasLt.h``. The wheel's include folder also holds its own
    copy of the CUDA runtime's headers, which must not shadow the toolkit's (a build reads the headers of
    the nvcc that compiles it): CPATH gets an overlay folder with only the headers the toolkit lacks.
    """
    if (home / "include" / "cublasLt.h").is_file():
        return {}
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return {}
    includes, libs = [], []
    for base in spec.submodule_search_locations:
        includes += [d for d in sorted(Path(base).glob("*/include")) if (d / "cublasLt.h").is_file()]
        libs += [str(d) for d in sorted(Path(base).glob("*/lib")) if any(d.glob("libcublasLt.so*"))]
    overlay = header_overlay(home, includes, env)
    out: dict[str, str] = {}
    for key, dirs in (("CPATH", [str(overlay)] if overlay else []), ("LIBRARY_PATH", libs)):
        present = [d for d in env.get(key, "").split(os.pathsep) if d]
        if dirs and not all(d in present for d in dirs):  # applied twice (a build process re-applies it): once
            out[key] = os.pathsep.join([*[d for d in dirs if d not in present], *present])
    return out


def header_overlay(home: Path, includes: list[Path], env: Mapping[str, str]) -> Path | None:
    """A folder of links to the headers of ``includes`` that the toolkit at ``home`` does not have (made once
    per toolkit and wheel set, under the user cache); None when there are none or it cannot be written."""
    import hashlib

    own = home / "include"
    key = hashlib.sha256("\n".join([str(own.resolve()), *map(str, includes)]).encode()).hexdigest()[:16]
    if env.get("KERNELPILOT_HEADER_OVERLAY_DIR"):
        root = Path(env["KERNELPILOT_HEADER_OVERLAY_DIR"])
    else:
        import platformdirs

        root = Path(platformdirs.user_cache_dir("kernelpilot")) / "include-overlay"
    folder = root / key
    if (folder / ".complete").is_file():
        return folder
    linked = 0
    try:
        for include in includes:
            for path in sorted(include.rglob("*")):
                relative = path.relative_to(include)
                if path.is_dir() or (own / relative).exists() or (folder / relative).exists():
                    continue
                (folder / relative).parent.mkdir(parents=True, exist_ok=True)
                (folder / relative).symlink_to(path)
                linked += 1
        if linked or folder.is_dir():
            (folder / ".complete").write_text("")
    except OSError:
        return None
    return folder if folder.is_dir() else None
