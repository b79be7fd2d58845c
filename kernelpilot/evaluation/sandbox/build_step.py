"""Confinement of the build step of a single-file or Triton candidate (the parent side; the builder applies it).

Building a single file runs its code: the module's top level (where ``load_inline`` usually sits), then
``ModelNew(...)`` and a forward on the meta device (single_file_build.py); a Triton candidate's build runs its
forward on fake tensors (triton_build.py). Under the KernelBench presets the
static policy lists file writes and introspection without refusing them (the runtime evidence decides), so a
published solution's code reaches the build step as it is. The worker that runs it later is confined
(confine.py); the build step now is too, with the same layers that work in-process: Landlock (writes only
to the build folder, the precompiled-header cache and a private HOME / TMPDIR inside the build folder; reads
the toolchain, kernelpilot, the candidate's and the problem's folders; the GPU's device files as the worker
has them, so ``torch.cuda.is_available()`` answers as it will there) and seccomp (no new sockets).

Where the machine has neither (no Landlock, no seccomp) the build runs as before and the report says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from kernelpilot.evaluation.build import pch
from kernelpilot.evaluation.sandbox import confine

ENV = "KERNELPILOT_BUILD_SANDBOX"  # the spec the builder script applies before it imports the candidate


def unconfined_note(why: str) -> str:
    """The build report's note when the candidate's code ran in the build step without confinement."""
    return f"build step unconfined ({why}): the candidate's code ran in it without the worker's confinement"


# the caches a candidate's code fills as it runs (Inductor's, Triton's, the CuTe DSL's), where the engine's
# environment points them: the worker may write them, and so may the build step that runs the same code first
WORKER_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUTE_DSL_CACHE_DIR")


def caches_of(run_env: Mapping[str, str]) -> list[Path]:
    """The folders of ``WORKER_CACHES`` that ``run_env`` names."""
    return [Path(run_env[k]) for k in WORKER_CACHES if run_env.get(k)]


def confine_build(run_env: dict[str, str], build_dir: Path, reads: Sequence[Path], writes: Sequence[Path] = ()) -> str:
    """Put the sandbox spec for a build in ``run_env`` (and its private HOME and TMPDIR, inside
    ``build_dir``); ``writes``: more folders it may write (Triton's cache). Returns "" when the build will
    run confined, else why not (for ``unconfined_note``)."""
    caps = confine.detect()
    if not caps.landlock_abi and not caps.seccomp:
        return f"no Landlock: {caps.landlock_reason or 'unavailable'}; no seccomp"
    private = build_dir / "kp-private"
    home, tmp = private / "home", private / "tmp"
    for d in (home, tmp):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_env["HOME"], run_env["TMPDIR"] = str(home), str(tmp)
    write = [build_dir.resolve()]
    for folder in writes:
        Path(folder).mkdir(parents=True, exist_ok=True)
        write.append(Path(folder).resolve())
    if run_env.get("KERNELPILOT_PCH_DIR"):
        write.append(Path(run_env["KERNELPILOT_PCH_DIR"]).resolve())
    elif pch.enabled(run_env):
        write.append(pch.cache_dir(run_env).resolve())
    if Path("/dev/shm").is_dir():
        write.append(Path("/dev/shm"))
    read = [*confine.toolchain_read_paths(), *confine.compiler_read_paths(run_env),
            *(p.resolve() for p in reads if p.exists())]
    spec = {"id": "build", "landlock_abi": caps.landlock_abi, "seccomp": caps.seccomp,
            "read": [str(p) for p in dict.fromkeys(read)], "write": [str(p) for p in dict.fromkeys(write)],
            "devices": [str(p) for p in confine.device_paths()]}
    run_env[ENV] = json.dumps(spec)
    return ""


def apply(environ: Mapping[str, str]) -> list[str]:
    """Builder side: confine this process as the spec in ``environ`` says (nothing when there is none)."""
    import tempfile

    text = environ.get(ENV)
    if not text:
        return []
    from kernelpilot.evaluation.sandbox.confine import apply_spec

    tempfile.tempdir = None  # a waiting builder cached /tmp before it took this build's TMPDIR
    return apply_spec(json.loads(text))
