"""kernelpilot's own bytecode cache, for installations of torch that have none and may not write one.

Some images ship torch without ``.pyc`` files and run with ``PYTHONDONTWRITEBYTECODE=1`` (containers often do).
Every process that imports torch then compiles its Python from source: on the GPU image of 2026-12-07,
``import torch, torch._dynamo, torch.profiler`` took 8.1 s, in each worker's start, each Triton build's process,
the card's facts and the baselines. There, and only there (:func:`needed`), kernelpilot keeps a cache of its own
(``PYTHONPYCACHEPREFIX``) in its cache folder:

- written by :func:`write`: a process that imports torch, its compilers and kernelpilot's worker, nothing else: no
  candidate or problem code ever runs in it;
- read by every process kernelpilot starts (:func:`env_for`) and by this one (:func:`use_here`), each with
  ``PYTHONDONTWRITEBYTECODE=1``: none of them writes there, and the confined workers and builds may read the
  folder but never write it (it is in no sandbox's writable list);
- checked by Python itself: a cached file is used only while its source's modification time and size match, so an
  upgraded torch is compiled from source again until the cache is rewritten (the stamp names the torch version).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from kernelpilot.problem_facts import torch_version

STAMP = "kernelpilot-bytecode.json"
# what a worker, a Triton build and the card import: torch and its compilers, then kernelpilot's own worker
MODULES = ("torch", "torch._dynamo", "torch.profiler", "torch._inductor.compile_fx", "triton", "numpy",
           "kernelpilot.evaluation.worker.main",
           # the standby builder's imports (build/standby.py): torch's extension builder (setuptools with it) and
           # the Triton build's child
           "torch.utils.cpp_extension", "triton.compiler", "kernelpilot.evaluation.build.triton_child",
           # the launcher's own (use_here: a prefix hides every installed __pycache__, the standard library's too,
           # so what the writer never imported is compiled in every launch; the card went 1.11 -> 1.87 s, H100)
           "kernelpilot.cli", "kernelpilot.tui.app", "kernelpilot.tui.launch")
_writing: dict[str, threading.Thread] = {}


def folder() -> Path:
    """The cache's folder: one per Python (its cache tag), under kernelpilot's cache directory."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelpilot")) / "pycache" / str(sys.implementation.cache_tag)


# read once a process: ready() is asked for every build and worker (the stamp names the version; Python itself
# checks each cached file against its source)
_torch_version = lru_cache(maxsize=1)(torch_version)


def needed(env: Mapping[str, str] | None = None) -> bool:
    """Whether processes started with ``env`` compile torch from source each time: its ``__init__`` has no
    bytecode beside it and they may not write any (``PYTHONDONTWRITEBYTECODE``, or a folder they cannot write)."""
    env = os.environ if env is None else env
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or sys.implementation.cache_tag is None:
        return False
    source = Path(spec.origin)
    cached = source.parent / "__pycache__" / Path(importlib.util.cache_from_source(str(source))).name
    if cached.is_file():
        return False
    return bool(env.get("PYTHONDONTWRITEBYTECODE")) or not os.access(source.parent, os.W_OK)


def ready(where: Path | None = None) -> bool:
    """The cache is written, for the torch installed now."""
    try:
        stamp = json.loads(((where or folder()) / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp.get("torch") == _torch_version()


# the writer: imports the modules, then stamps the folder itself (so a writer outlives a command that exits first)
_WRITER = """import importlib, json, sys, time
t0 = time.monotonic()
modules = json.loads(sys.argv[2])
for m in modules:
    importlib.import_module(m)
from kernelpilot.problem_facts import torch_version
stamp = {"torch": torch_version(), "python": sys.version.split()[0], "seconds": round(time.monotonic() - t0, 2),
         "modules": modules}
with open(sys.argv[1], "w") as f:
    json.dump(stamp, f)
"""


def write(where: Path | None = None, timeout_s: float = 600.0) -> float:
    """Fill the cache: import :data:`MODULES` in a fresh process (at low priority, in a session of its own) that
    may write bytecode only there, and stamp it. Returns the seconds the imports took; raises RuntimeError when
    that process fails."""
    where = where or folder()
    where.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(where)
    root = str(Path(__file__).resolve().parents[3])  # kernelpilot importable, as in every process it starts
    env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    (where / STAMP).unlink(missing_ok=True)
    run = subprocess.run([sys.executable, "-c", _WRITER, str(where / STAMP), json.dumps(MODULES)], env=env,
                         capture_output=True, text=True, timeout=timeout_s, start_new_session=True,
                         preexec_fn=lambda: os.nice(10))
    if run.returncode != 0:
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the bytecode cache was not written: {tail[0]}")
    return float(json.loads((where / STAMP).read_text())["seconds"])


def write_soon(where: Path | None = None) -> threading.Thread | None:
    """Start :func:`write` on a thread where the cache is :func:`needed` and not :func:`ready`; None otherwise.
    One writer per folder in this process; the processes started meanwhile compile from source, as before."""
    where = where or folder()
    if not needed() or ready(where):
        return None
    running = _writing.get(str(where))
    if running is not None and running.is_alive():
        return running

    def run() -> None:
        try:
            write(where)
        except (OSError, RuntimeError, subprocess.SubprocessError):
            pass  # the processes kernelpilot starts compile torch from source, as without the cache

    thread = threading.Thread(target=run, name="kp-bytecode", daemon=True)
    _writing[str(where)] = thread
    thread.start()
    return thread


def env_for(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a process kernelpilot starts adds to its environment: the cache, read-only, where it is needed and
    ready; nothing otherwise (a prefix would hide the ``__pycache__`` folders an installation has)."""
    if not needed(env) or not ready():
        return {}
    return {"PYTHONPYCACHEPREFIX": str(folder()), "PYTHONDONTWRITEBYTECODE": "1"}


def use_here() -> bool:
    """This process reads the cache for the modules it has not imported yet (torch, for the card's facts; the card's
    facts process reads it too: problem_facts.analyse_apart)."""
    extra = env_for()
    if not extra:
        return False
    sys.pycache_prefix = extra["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = True
    return True
