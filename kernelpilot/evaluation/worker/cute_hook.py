"""CuTe-DSL compiles in the worker: ``cutlass.cute.compile`` wrapped before a CuTe candidate is imported.

Each compile the candidate starts (in ``__init__``, or in its first forward, the warm-up) runs under the build
limit with its call's deadline paused (watchdog.compiling), and its seconds count as build time
(compile_hook.record). The DSL's own file cache does not serve ``cute.compile`` (it passes ``no_cache``), so the
compiled function is kept here: exported with the DSL's ``export_to_c`` and loaded back with
``cute.runtime.load_module`` from ``$CUTE_DSL_CACHE_DIR/kernelpilot``, under a key (``compile_key``) made of

- the source of every .py file of the candidate (the function's file and the helpers beside it it may import),
  the function's file name and qualified name (not its module's name, which the worker makes new for each
  evaluation);
- each argument's type: a tensor's element type, layout with its static and dynamic modes, memory space,
  assumed alignment and stride width; a scalar's type and value; a stream's type only;
- the compile options, the target arch and the installed DSL's distributions and versions.

An argument the key cannot describe (an object of the candidate's own) compiles without the cache, as does
every compile when ``KERNELPILOT_CUTE_CACHE=0``. A cached function that does not load is compiled again. Each
compile's record (``compiles``) says how it was served and, when the cache could not be used, why (``note``):
the verdict's build section shows it as a warning, so a cache that never serves is seen, not silently slow.

Each compile asks the DSL for ptxas's remarks (``remarks{ptx}``: the figures ``ptxas -v`` prints, which the DSL
writes to stderr), so registers, shared memory, stack frame and spills per kernel come from the compiled code.
They are kept beside the cached function (``kp_<key>.json``) and listed in ``kernels`` for the verdict's build
section. A compile whose options are an object rather than a string is compiled as given, without figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from kernelpilot.evaluation.worker import compile_hook, watchdog

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SIMPLE = (int, float, bool, str, bytes, type(None))
kernels: list[dict[str, Any]] = []  # ptxas's figures of each kernel compiled or loaded since the last take_kernels()
compiles: list[dict[str, Any]] = []  # each cute.compile since the last take(): its function and how it was served
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_warmup = [False]  # the worker's build_warmup phase runs: its seconds are build time already


@contextmanager
def warming_up() -> Iterator[None]:
    """The warm-up forward (pipeline.py): compiles inside it are in that phase's seconds, not recorded again."""
    _warmup[0] = True
    try:
        yield
    finally:
        _warmup[0] = False


def _describe(value: Any, depth: int = 0) -> str | None:
    """A compile-relevant description of one argument, or None when it cannot be described safely."""
    if isinstance(value, _SIMPLE):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)) and depth < 4:
        parts = [_describe(v, depth + 1) for v in value]
        return None if None in parts else f"{type(value).__name__}(" + ",".join(parts) + ")"  # type: ignore[arg-type]
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if kind.startswith("cuda.bindings") or "Stream" in type(value).__name__:
        return kind  # a stream: its value is the runtime's, not the compile's
    if kind.startswith("torch.") and not hasattr(value, "data_ptr"):
        return f"{kind}:{value!r}"  # torch.dtype and the like
    if kind.startswith("cutlass.") and "Tensor" in type(value).__name__:  # from_dlpack, fake tensors
        try:
            extra = [getattr(value, a, None) for a in ("element_type", "_assumed_align", "_use_32bit_stride",
                                                          "memspace", "dynamic_shapes_mask", "dynamic_strides_mask")]
        except Exception:  # a property the runtime tensor does not support: not described, not cached
            return None
        return f"{kind}:" + _ADDRESS.sub("", repr(value)) + ":" + repr(extra)
    if kind.startswith("cutlass.") and not callable(value):
        return f"{kind}:" + _ADDRESS.sub("", repr(value))  # a DSL scalar (cutlass.Float32(1.0)), a dtype
    return None


def _sources(candidate_dir: str, func: Any) -> bytes | None:
    digest = hashlib.sha256()
    files = sorted(Path(candidate_dir).glob("*.py")) if candidate_dir else []
    try:
        own = Path(func.__code__.co_filename)
        files = sorted({*files, own}) if own.is_file() else files
        for f in files:
            digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    except (OSError, AttributeError):
        return None
    return digest.digest()


def compile_key(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, arch: str, versions: str,
                candidate_dir: str) -> str | None:
    """The cache key of one ``cute.compile(func, *args, **kwargs)``, or None when it must not be cached."""
    return key_or_reason(func, args, kwargs, arch=arch, versions=versions, candidate_dir=candidate_dir)[0]


def key_or_reason(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, arch: str, versions: str,
                  candidate_dir: str) -> tuple[str | None, str]:
    """(the cache key, "") of one ``cute.compile(func, *args, **kwargs)``, or (None, why it cannot be cached): the
    first argument the key cannot describe, or the candidate's sources that could not be read."""
    target = getattr(func, "__func__", func)
    target = getattr(target, "__wrapped__", target)
    if getattr(func, "__self__", None) is not None:  # a bound method: its object is an argument too
        args = (func.__self__, *args)
    described = []
    for label, value in [(str(i), a) for i, a in enumerate(args)] + [(f"{k}=", v) for k, v in sorted(kwargs.items())]:
        if (text := _describe(value)) is None:
            kind = f"{type(value).__module__}.{type(value).__qualname__}"
            return None, f"not cached: argument {label} ({kind}) is not in the key"
        described.append(text)
    sources = _sources(candidate_dir, target)
    if sources is None:
        return None, "not cached: the candidate's sources could not be read"
    parts = [*described, *sorted(kwargs)]
    digest = hashlib.sha256(sources)
    # the function by its file's name, not its module's: the worker imports each evaluation's candidate under a
    # module name of its own (kp_candidate_<n>_<path>), so a module name would make every re-run a new key
    # (2026-12-06, H100: a warm worker compiled every re-run of the CuTe example again)
    code = getattr(target, "__code__", None)
    where = Path(code.co_filename).name if code is not None else getattr(target, "__module__", "")
    name = f"{where}:{getattr(target, '__qualname__', '')}"
    for item in (name, *parts, arch, versions):
        digest.update(b"\0" + str(item).encode())
    return digest.hexdigest()[:32], ""


def take() -> dict[str, Any]:
    """What one evaluation's CuTe compiles give its verdict (assembly.py): ``build_kernels``, ptxas's figures per
    kernel, and ``build_compiles``, each ``cute.compile`` call with ``how`` it was served (``compiled``,
    ``loaded`` from the cache, or ``uncached``: compiled with no key). Empty when the candidate compiled nothing."""
    out: dict[str, Any] = {}
    if found := take_kernels():
        out["build_kernels"] = found
    if compiles:
        out["build_compiles"] = list(compiles)
        compiles.clear()
    return out


def take_kernels() -> list[dict[str, Any]]:
    """The figures gathered since the last call (one evaluation's), each kernel once."""
    seen: dict[str, dict[str, Any]] = {}
    for k in kernels:
        seen.setdefault(f"{k.get('kernel')}@{k.get('arch')}", k)
    kernels.clear()
    return list(seen.values())


def with_remarks(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """``kwargs`` with ptxas's remarks asked for; None when the options are not a string (compiled as given)."""
    options = kwargs.get("options")
    if options is None:
        return {**kwargs, "options": "remarks{ptx}"}
    if isinstance(options, str):
        return kwargs if "remarks" in options else {**kwargs, "options": f"{options} remarks{{ptx}}"}
    return None


def ptxas_lines(text: str) -> str:
    """ptxas's own lines out of the DSL's remarks: after each "ptxas output:", up to a blank line or the DSL's
    next remark or suggestion. Where ptxas detected spills the DSL wraps them in an indented block, a long kernel
    name or "spill loads" on lines of their own: a line that does not start with "ptxas" continues the last."""
    out: list[str] = []
    inside = False
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.strip()
        if "ptxas output:" in line:
            inside, line = True, line.split("ptxas output:", 1)[1].strip()
            if not line:
                continue
        if not inside:
            continue
        if not line or line.startswith(("suggestion:", "remark", "-->")):
            inside = False
        elif line.startswith("ptxas") or not out:
            out.append(line)
        else:
            out[-1] += " " + line
    return "\n".join(out)


def figures(text: str) -> list[dict[str, Any]]:
    """ptxas's figures per kernel from what the DSL printed while it compiled."""
    from kernelpilot.evaluation.build.diagnostics import parse_kernel_resources

    return [asdict(k) for k in parse_kernel_resources(ptxas_lines(text))]


class _Tee(io.StringIO):
    """stderr as it was, and a copy of it."""

    def __init__(self, through: TextIO) -> None:
        super().__init__()
        self.through = through

    def write(self, text: str) -> int:
        self.through.write(text)
        return super().write(text)


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"


def _load(directory: Path, key: str) -> tuple[Any, str]:
    """The cached function of ``key`` (None when there is none) and why an entry that is there did not load."""
    import cutlass.cute as cute

    obj = directory / f"kp_{key}.o"
    if not obj.is_file():
        return None, ""
    try:
        return getattr(cute.runtime.load_module(str(obj)), f"kp_{key}"), ""
    except Exception as exc:  # a cache entry that does not load (partial write, another DSL build): compiled again
        return None, f"not loaded from the cache ({_failure(exc)})"


def _store(directory: Path, key: str, compiled: Any, found: list[dict[str, Any]]) -> str:
    """Keep a compiled function for later workers; "" when it was kept, else why not (it compiles again)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f"tmp-{os.getpid()}"
        tmp.mkdir(exist_ok=True)
        compiled.export_to_c(str(tmp), f"kp_{key}", function_prefix=f"kp_{key}")
        os.replace(tmp / f"kp_{key}.o", directory / f"kp_{key}.o")
        (tmp / "figures.json").write_text(json.dumps(found))
        os.replace(tmp / "figures.json", directory / f"kp_{key}.json")
        return ""
    except Exception as exc:
        return f"not stored in the cache ({_failure(exc)})"
    finally:
        shutil.rmtree(directory / f"tmp-{os.getpid()}", ignore_errors=True)


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", type(func).__name__))


def _arch() -> str:
    if os.environ.get("CUTE_DSL_ARCH"):
        return os.environ["CUTE_DSL_ARCH"]
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


class _CachedCompile:
    """``cute.compile`` with the cache; ``cute.compile[...]`` (the DSL's option selectors) goes to the real one."""

    kernelpilot_cute_hook = True

    def __init__(self, real: Any, versions: str, candidate_dir: str) -> None:
        self.real, self.versions, self.candidate_dir = real, versions, candidate_dir
        self.cache = Path(os.environ.get("CUTE_DSL_CACHE_DIR") or Path.home() / ".cache" / "cute") / "kernelpilot"
        self.use_cache = os.environ.get("KERNELPILOT_CUTE_CACHE", "1") != "0"

    def __getitem__(self, selector: Any) -> Any:
        return self.real[selector]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __call__(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        key, note = key_or_reason(func, args, kwargs, arch=_arch(), versions=self.versions,
                                  candidate_dir=self.candidate_dir) if self.use_cache else (None, "")
        if key is not None:
            hit, note = _load(self.cache, key)
            if hit is not None:
                compiles.append({"function": _name(func), "how": "loaded", "key": key})
                with contextlib.suppress(OSError, ValueError):
                    kernels.extend(json.loads((self.cache / f"kp_{key}.json").read_text()))
                return hit
        what = f"cute.compile {_name(func)}"
        began = time.monotonic()
        asked = with_remarks(kwargs)
        tee = _Tee(sys.stderr)
        with watchdog.compiling(what), contextlib.redirect_stderr(tee):
            compiled = self.real(func, *args, **(asked if asked is not None else kwargs))
        if not _warmup[0]:
            compile_hook.record(what, time.monotonic() - began)
        found = figures(tee.getvalue()) if asked is not None else []
        kernels.extend(found)
        if key is not None:
            note = "; ".join(n for n in (note, _store(self.cache, key, compiled, found)) if n)
        record = {"function": _name(func), "how": "compiled" if key is not None else "uncached", "key": key or ""}
        compiles.append({**record, "note": note} if note else record)
        return compiled


def install(candidate_dir: str) -> None:
    """Wrap ``cutlass.cute.compile`` in this process (the worker, before a CuTe candidate is imported)."""
    import cutlass.cute as cute

    from kernelpilot.evaluation.build.cute_build import dsl_versions

    if not getattr(cute.compile, "kernelpilot_cute_hook", False):
        cute.compile = _CachedCompile(cute.compile, dsl_versions(), candidate_dir)
    else:
        cute.compile.candidate_dir = candidate_dir  # the worker judges another candidate
