"""Precompiled headers for the torch side of a candidate's C++ sources, built once per machine.

A candidate's ``binding.cpp`` (and the ``main.cpp`` that ``load_inline`` generates) spends nearly all
of its first compile parsing the torch headers: 26 s of 31 s for the softmax example on our H200. GCC
can load a precompiled header instead. kernelpilot builds with a compiler wrapper (``CXX``, see
:func:`compiler_env`) that, for each C++ compile:

1. reads the source's *preamble*: its leading ``#include <...>`` lines, with only comments and blank
   lines around them, up to the first other line;
2. looks for a precompiled header of exactly that preamble, built by the same compiler with the same
   flags (less the output, dependency-file and ``TORCH_EXTENSION_NAME`` options), and checks that no
   header it was built from has changed since (size and mtime of each, from its dependency file);
3. found: compiles with ``-include <preamble.h> -Winvalid-pch``. The translation unit is the preamble's
   headers followed by the source, whose leading includes, already seen, add nothing: the same program.
   GCC loads the ``.gch`` in place of the header, or, if it finds the ``.gch`` unusable, says so and
   reads the header itself; either way the object is the same;
4. not found: compiles as usual, and starts the precompiled header's one-time build in the background
   (a detached process, one at a time per key), so the next candidate gets it.

Every decision is printed as a ``kernelpilot-pch:`` line, which build.py turns into the build report's
``pch`` field. ``KERNELPILOT_PCH=0`` turns the wrapper into a plain pass-through. Only GCC is handled;
another compiler is passed through and the report says so. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MARKER = "kernelpilot-pch: "
FORMAT = 1  # bump when the layout of a key directory changes
KEEP = 4  # precompiled headers kept (each is hundreds of MB); the least recently used go first
STALE_LOCK_S = 900.0
_CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++")
_INCLUDE = re.compile(r"#\s*include\s*<[^>]+>\s*(//.*)?$")
# options that name this compile's files or this extension, not how headers are compiled
_DROP_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
_DROP = {"-c", "-MMD", "-MD", "-MP"}


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("KERNELPILOT_PCH_DIR"):
        return Path(env["KERNELPILOT_PCH_DIR"])
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "pch"


def enabled(env: Mapping[str, str]) -> bool:
    return env.get("KERNELPILOT_PCH", "1").strip().lower() not in ("0", "off", "no", "false")


def compiler_env(env: Mapping[str, str]) -> dict[str, str]:
    """``CXX`` (the wrapper) and what it needs, for a build environment; {} when precompiled headers are off.

    The wrapper is a two-line script named ``g++`` (torch accepts a compiler by its name) in the cache
    directory; the compiler it runs is the one the build would have used (``$CXX``, else ``c++``).
    """
    if not enabled(env):
        return {}
    root = cache_dir(env)
    script = root / "bin" / "g++"
    real = env.get("KERNELPILOT_REAL_CXX") or env.get("CXX") or "c++"
    if real == str(script):
        real = "c++"  # CXX is already the wrapper (a nested build)
    resolved = shutil.which(real, path=env.get("PATH")) or real
    text = f'#!/bin/sh\nexec "{sys.executable}" -m kernelpilot.evaluation.build.pch cxx "$@"\n'
    try:
        if not script.is_file() or script.read_text() != text:
            script.parent.mkdir(parents=True, exist_ok=True)
            tmp = script.with_suffix(f".{os.getpid()}")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(script)
    except OSError:
        return {}
    return {"CXX": str(script), "KERNELPILOT_REAL_CXX": resolved, "KERNELPILOT_PCH_DIR": str(root)}


# ---- what a compile needs -------------------------------------------------------------------------
def preamble(source: str) -> str:
    """The leading ``#include <...>`` lines of ``source`` (comments and blank lines allowed between them)."""
    lines: list[str] = []
    in_block = False
    for raw in source.splitlines():
        line = raw.strip()
        if in_block:
            in_block = "*/" not in line
            continue
        if not line or line.startswith("//"):
            continue
        if line.startswith("/*"):
            in_block = "*/" not in line[2:]
            continue
        if _INCLUDE.fullmatch(line):
            lines.append(line.split("//")[0].strip())
            continue
        break
    return "".join(f"{line}\n" for line in lines)


@dataclass
class Compile:
    source: Path
    flags: list[str]  # how headers are compiled: the command less files, dependency output and the name


def parse_compile(args: list[str]) -> Compile | None:
    """The C++ source and header-relevant flags of a ``-c`` compile, or None for anything else."""
    if "-c" not in args or "-x" in args or "-include" in args:
        return None
    sources = [a for a in args if not a.startswith("-") and a.endswith(_CXX_SUFFIXES)]
    if len(sources) != 1:
        return None
    flags: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in _DROP_WITH_VALUE:
            skip = True
            continue
        if a in _DROP or a == sources[0] or a.startswith("-DTORCH_EXTENSION_NAME="):
            continue
        flags.append(a)
    return Compile(Path(sources[0]), flags)


def compiler_identity(real: str) -> str:
    """The compiler's path and version banner (GCC only; '' for another compiler)."""
    try:
        out = subprocess.run([real, "-v"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return ""
    banner = next((line for line in out.stderr.splitlines() if line.startswith("gcc version")), "")
    return f"{os.path.realpath(shutil.which(real) or real)}\n{banner}" if banner else ""


def key_for(identity: str, flags: list[str], text: str, env: Mapping[str, str]) -> str:
    search = [list(dict.fromkeys(d for d in env.get(var, "").split(os.pathsep) if d))
              for var in ("CPATH", "CPLUS_INCLUDE_PATH")]  # the include path the variables add, in order
    material = json.dumps([FORMAT, identity, flags, text, search])
    return hashlib.sha256(material.encode()).hexdigest()[:20]


# ---- one precompiled header -------------------------------------------------------------------------
class Entry:
    """A key directory: preamble.h, preamble.h.gch, meta.json (flags, dependencies, build seconds)."""

    def __init__(self, root: Path, key: str) -> None:
        self.dir = root / key
        self.key = key
        self.header = self.dir / "preamble.h"
        self.gch = self.dir / "preamble.h.gch"
        self.meta = self.dir / "meta.json"
        self.lock = self.dir / "building"

    def usable(self) -> tuple[bool, str]:
        """Built, and every header it was built from unchanged; else why not."""
        if not self.gch.is_file():
            return False, "not built"
        try:
            meta = json.loads(self.meta.read_text())
        except (OSError, ValueError):
            return False, "no metadata"
        for path, size, mtime in meta.get("deps", []):
            try:
                st = os.stat(path)
            except OSError:
                return False, f"{path} is gone"
            if st.st_size != size or st.st_mtime_ns != mtime:
                return False, f"{path} changed since it was built"
        return True, ""

    def building(self) -> bool:
        try:
            st = self.lock.stat()
        except OSError:
            return False
        return time.time() - st.st_mtime < STALE_LOCK_S

    def start_build(self, real: str, flags: list[str], text: str) -> bool:
        """Start the one-time build in a detached process; False when one is already running."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.building():
            return False
        self.lock.unlink(missing_ok=True)
        try:
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.close(fd)
        self.header.write_text(text)
        (self.dir / "request.json").write_text(json.dumps({"compiler": real, "flags": flags}))
        log = open(self.dir / "build.log", "wb")
        subprocess.Popen([sys.executable, "-m", "kernelpilot.evaluation.build.pch", "build", str(self.dir)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return True


def build_entry(directory: Path) -> int:
    """The one-time build (run detached): compile preamble.h to preamble.h.gch, record its dependencies."""
    entry = Entry(directory.parent, directory.name)
    try:
        request = json.loads((directory / "request.json").read_text())
        tmp = directory / f"preamble.h.gch.{os.getpid()}"
        deps_file = directory / "deps.d"
        t0 = time.monotonic()
        cmd = [request["compiler"], *request["flags"], "-x", "c++-header", str(entry.header), "-o", str(tmp),
               "-MD", "-MF", str(deps_file)]
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            return done.returncode
        deps = []
        for path in _dependency_paths(deps_file.read_text()):
            st = os.stat(path)
            deps.append([path, st.st_size, st.st_mtime_ns])
        entry.meta.write_text(json.dumps({"flags": request["flags"], "compiler": request["compiler"],
                                          "seconds": round(time.monotonic() - t0, 2), "deps": deps,
                                          "built_at": time.time()}))
        tmp.replace(entry.gch)
        _evict(directory.parent, keep=directory)
        return 0
    finally:
        entry.lock.unlink(missing_ok=True)


def _dependency_paths(text: str) -> list[str]:
    body = text.replace("\\\n", " ").split(":", 1)[-1]
    return [p for p in body.split() if p and p != "\\"]


def _evict(root: Path, keep: Path) -> None:
    entries = [d for d in root.iterdir() if d.is_dir() and (d / "meta.json").is_file()]
    entries.sort(key=lambda d: (d / "meta.json").stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


# ---- the wrapper ------------------------------------------------------------------------------------
def _say(text: str) -> None:
    print(MARKER + text, file=sys.stderr, flush=True)


def cxx_main(args: list[str]) -> int:
    real = os.environ.get("KERNELPILOT_REAL_CXX") or "c++"
    plan = parse_compile(args) if enabled(os.environ) else None
    text = ""
    if plan is not None:
        try:
            text = preamble(plan.source.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            text = ""
    if plan is None or not text:
        os.execvp(real, [real, *args])
    identity = compiler_identity(real)
    if not identity:
        _say(f"not used for {plan.source.name}: {real} is not GCC")
        os.execvp(real, [real, *args])
    entry = Entry(cache_dir(), key_for(identity, plan.flags, text, os.environ))
    ok, why = entry.usable()
    if not ok:
        started = entry.start_build(real, plan.flags, text)
        state = "building it in the background for the next build" if started else "its build is under way"
        _say(f"not used for {plan.source.name} ({why}; key {entry.key}): {state}")
        os.execvp(real, [real, *args])
    os.utime(entry.meta)  # recently used: kept by the eviction
    done = subprocess.run([real, "-include", str(entry.header), "-Winvalid-pch", *args], stderr=subprocess.PIPE)
    err = done.stderr.decode("utf-8", errors="replace")
    if "Winvalid-pch" in err:
        entry.gch.unlink(missing_ok=True)  # GCC refused it and read the header itself: rebuild next time
        _say(f"refused by the compiler for {plan.source.name} (key {entry.key}); compiled from the headers")
        err = "\n".join(line for line in err.splitlines() if "Winvalid-pch" not in line)
    else:
        _say(f"used for {plan.source.name} (key {entry.key})")
    if err.strip():
        sys.stderr.write(err if err.endswith("\n") else err + "\n")
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cxx"]:
        return cxx_main(argv[1:])
    if argv[:1] == ["build"] and len(argv) == 2:
        return build_entry(Path(argv[1]))
    print("usage: python -m kernelpilot.evaluation.build.pch {cxx ARGS... | build DIR}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
