"""``kernelpilot init``: a starter KernelBench problem (row softmax, bf16), a commented kernelpilot.toml and a
starter candidate (``write_starter_candidate``), in a git repository (``--git-init`` makes one);
``kernelpilot init --from-inductor PATH``: torch.compile's kernels for a problem (or every problem of a folder
or KernelBench checkout, into the suite's solutions layout) as Triton candidates."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernelpilot.config import ProjectConfig
from kernelpilot.config_file import find_git_root
from kernelpilot.errors import KernelpilotError, WorkspaceError
from kernelpilot.inductor.batch import INDEX, convert_all, discover, record_all
from kernelpilot.inductor.c0 import candidate_from_recording, write_candidate
from kernelpilot.inductor.generate import inductor_candidate
from kernelpilot.starter_cute import STARTER_CUTE_MODEL
from kernelpilot.inductor.helpers import ConversionError

STARTER_PROBLEM = '''\
"""Row softmax in bfloat16: y[i, :] = exp(x[i, :] - max_i) / sum(exp(x[i, :] - max_i)).

A KernelBench-format problem: kernelpilot imports Model, get_inputs and get_init_inputs unchanged.
Memory bound: each row is read once and written once, so the speed of light is set by HBM bandwidth.
"""

import torch
import torch.nn as nn

batch_size = 4096
dim = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''


STARTER_HEADER = r"""// The kernel of softmax.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// y[r, :] = softmax(x[r, :]) for the row r = blockIdx.x: one CTA of kThreads threads per row.
template <int kThreads>
__global__ void softmax_rows(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int64_t n_cols);
"""

STARTER_KERNEL = ("// Starter kernel for the row softmax: correct, not fast. One CTA per row, fp32 math, three passes"
                  r""" over
// the row in global memory (max, sum of exponentials, write) with 2-byte loads. Make it faster: every
// save is built, checked against the reference and timed. Device code only (binding.cpp launches it), so
// an edit here builds this file's device code alone, in about a second.
#include "softmax.h"

namespace {

// max (is_max) or sum of v over the CTA, through shared memory; every thread gets the result.
template <int kThreads>
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = scratch[threadIdx.x + stride];
      scratch[threadIdx.x] = is_max ? fmaxf(scratch[threadIdx.x], other) : scratch[threadIdx.x] + other;
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();
  return result;
}

}  // namespace

template <int kThreads>
__global__ void __launch_bounds__(kThreads) softmax_rows(const __nv_bfloat16* __restrict__ x,
                                                          __nv_bfloat16* __restrict__ y, int64_t n_cols) {
  __shared__ float scratch[kThreads];
  const int64_t start = static_cast<int64_t>(blockIdx.x) * n_cols;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) m = fmaxf(m, __bfloat162float(x[start + i]));
  m = block_reduce<kThreads>(m, true, scratch);
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) s += __expf(__bfloat162float(x[start + i]) - m);
  s = block_reduce<kThreads>(s, false, scratch);
  const float inv = 1.f / s;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    y[start + i] = __float2bfloat16(__expf(__bfloat162float(x[start + i]) - m) * inv);
  }
}

// The instance binding.cpp launches.
template __global__ void softmax_rows<256>(const __nv_bfloat16*, __nv_bfloat16*, int64_t);
""")

STARTER_BINDING = ("// Python binding of softmax.cu: checks the tensor, launches one CTA per row on the current stream."
                   r""" Host code
// only: kernels are launched through kernelpilot/launch.h, so an edit of softmax.cu builds device code alone.
// Only the torch headers it uses (torch/extension.h would parse all of libtorch, a slower first build).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>  // PYBIND11_MODULE and the at::Tensor <-> torch.Tensor caster

#include <kernelpilot/launch.h>

#include "softmax.h"

namespace {

constexpr int kThreads = 256;  // softmax.cu instantiates the kernel for this CTA size

at::Tensor softmax_last_dim(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == at::kBFloat16, "softmax: x must be bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1 && x.is_contiguous(), "softmax: x must be contiguous with at least one dimension");
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  const int64_t n_cols = x.size(-1), rows = x.numel() / n_cols;
  TORCH_CHECK(rows <= 0x7fffffffLL, "softmax: at most 2^31 - 1 rows");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const kp::Config config{dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, c10::cuda::getCurrentCUDAStream()};
  const cudaError_t status = kp::launch(config, softmax_rows<kThreads>, static_cast<const __nv_bfloat16*>(x.data_ptr()),
                                        static_cast<__nv_bfloat16*>(y.data_ptr()), n_cols);
  TORCH_CHECK(status == cudaSuccess, "softmax: launch failed: ", cudaGetErrorString(status));
  return y;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("softmax", &softmax_last_dim, "softmax over the last dimension (bf16 in/out, fp32 math)");
}
""")

STARTER_MODEL = '''"""Starter candidate: ModelNew calls the kernel in softmax.cu through binding.cpp."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax(x.contiguous())
'''


def write_starter_candidate(candidate_dir: Path, language: str = "cuda") -> list[Path]:
    """The starter problem's candidate in the device-only layout (as the examples' candidate/ folders):
    softmax.h (the kernel's declaration), softmax.cu (device code), binding.cpp (host code, launching through
    kernelpilot/launch.h), and model_new.py calling ``kernelpilot.extension.load_extension(__file__)``;
    with ``language="cute"`` one model_new.py whose kernel is CuTe DSL (starter_cute.py)."""
    candidate_dir.mkdir(parents=True, exist_ok=True)
    files = {"model_new.py": STARTER_CUTE_MODEL} if language == "cute" else {
        "softmax.h": STARTER_HEADER, "softmax.cu": STARTER_KERNEL, "binding.cpp": STARTER_BINDING,
        "model_new.py": STARTER_MODEL}
    for name, text in files.items():
        (candidate_dir / name).write_text(text, encoding="utf-8")
    return [candidate_dir / name for name in files]


def init_project(directory: Path, name: str = "softmax", force: bool = False, language: str = "cuda") -> list[Path]:
    """Write ``<directory>/<name>.py``, ``<directory>/kernelpilot.toml`` and the starter candidate in
    ``<directory>/kernels/<name>/``; returns the paths written."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise KernelpilotError(f"problem name {name!r} is not a valid Python module name; use letters, digits and "
                               "underscores.")
    if directory.exists() and not directory.is_dir():
        raise KernelpilotError(f"{directory} exists and is not a directory; pass a project directory.")
    problem = directory / f"{name}.py"
    config = directory / "kernelpilot.toml"
    candidate = directory / "kernels" / name
    existing = [p for p in (problem, config) if p.exists()]
    if candidate.is_dir() and any(candidate.iterdir()):
        existing.append(candidate)
    if existing and not force:
        names = " and ".join(str(p) for p in existing)
        raise KernelpilotError(f"{names} already exist{'s' if len(existing) == 1 else ''}; pass --force to overwrite, "
                               "or choose another --problem name or directory.")
    directory.mkdir(parents=True, exist_ok=True)
    problem.write_text(STARTER_PROBLEM, encoding="utf-8")
    config.write_text(commented_template(problem.name, f"kernels/{name}"), encoding="utf-8")
    return [problem, config, *write_starter_candidate(candidate, language)]


def inductor_command(problem: str, target: Path, compile_mode: str = "default", recording: Path | None = None,
                     helpers: Path | None = None) -> int:
    """``kernelpilot init --from-inductor PROBLEM``: torch.compile's kernels as a Triton candidate."""
    if target.exists() and any(target.iterdir()):
        raise KernelpilotError(f"{target} is not empty; pass --out with a new directory, or remove it.")
    helper_text = _read(helpers, "--helpers") if helpers else None
    try:
        if recording is None:
            conversion = inductor_candidate(problem, target, compile_mode)
        else:
            conversion = candidate_from_recording(problem, json.loads(_read(recording, "--recordings")), helper_text)
            write_candidate(target, conversion)
    except ConversionError as exc:
        raise KernelpilotError(f"cannot start from torch.compile's kernels: {exc}") from exc
    for name in sorted(conversion.files):
        print(f"wrote {target / name}")
    libs = f"; library calls kept: {', '.join(conversion.libraries)}" if conversion.libraries else ""
    print(f"kernels: {', '.join(conversion.kernels) or 'none'} (launch configs: {conversion.configs}{libs})")
    print(f"next: kernelpilot eval {problem} {target}")
    return 0


def _read(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KernelpilotError(f"cannot read {path} ({exc.strerror}); check the path given to {flag}.") from None


def inductor_batch_command(source: Path, out: Path, recordings: Path | None, helpers: Path | None, jobs: int | None,
                           budget_gb: float, timeout: float = 300.0, levels: list[int] | None = None) -> int:
    """``kernelpilot init --from-inductor DIR``: c0 for every problem under DIR into the suite's solutions layout.

    Without ``recordings``, torch.compile is recorded first into ``out/_recordings`` (only the problems not
    recorded there yet: the same command run again after a killed call does what is left)."""
    items = discover([source], levels)
    helper_text = _read(helpers, "--helpers") if helpers else None
    if recordings is None:
        recordings = out / "_recordings"
        print(f"recording torch.compile for {len(items)} problems into {recordings} (GPU memory budget "
              f"{budget_gb:g} GiB, {timeout:g} s per problem)", flush=True)
        try:
            record_all(items, recordings, jobs=jobs, budget_gb=budget_gb, timeout=timeout)
        except ConversionError as exc:
            raise KernelpilotError(f"cannot record torch.compile's kernels: {exc}") from exc
    elif not recordings.is_dir():
        raise KernelpilotError(f"--recordings {recordings} is not a folder; pass the folder that holds <key>.json per "
                               "problem (benchmarks/kb_record.py's --out).")
    rows = convert_all(items, recordings, out, jobs, helper_text)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    print(f"{len(rows)} problems: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; outcomes and reasons in {out / INDEX}")
    print(f"next: kernelpilot suite {source} --solutions {out}")
    return 0


def _levels(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise KernelpilotError(f"--levels {text!r}: give level numbers separated by commas, e.g. 1,2") from None


def init_command(args: Any) -> int:
    directory = Path(args.dir)
    if getattr(args, "from_inductor", None):
        source = Path(args.from_inductor)
        recordings = Path(args.recordings) if getattr(args, "recordings", None) else None
        helpers = Path(args.helpers) if getattr(args, "helpers", None) else None
        if source.is_dir() and not (source / "problem.py").is_file():
            out = Path(args.out) if args.out else directory / "kernels" / "c0"
            return inductor_batch_command(source, out, recordings, helpers, getattr(args, "jobs", None),
                                          float(getattr(args, "budget_gb", 110.0)),
                                          float(getattr(args, "timeout", 300.0)),
                                          _levels(getattr(args, "levels", None)))
        stem = source.stem
        name = source.resolve().parent.name if stem == "problem" else stem
        target = Path(args.out) if args.out else directory / "kernels" / f"{name}-inductor"
        if recordings is not None and recordings.is_dir():
            recordings = recordings / f"{discover([source])[0].key}.json"
        return inductor_command(args.from_inductor, target, recording=recordings, helpers=helpers)
    make_repository = _needs_repository(directory, bool(getattr(args, "git_init", False)))
    written = init_project(directory, args.problem, args.force, getattr(args, "language", "cuda") or "cuda")
    for path in written:
        print(f"wrote {path}")
    target = "" if directory.resolve() == Path.cwd().resolve() else f" {directory}"
    if make_repository:
        _git_init_and_commit(directory, written)
        print(f"made a git repository in {directory.resolve()} and committed these files")
    else:
        shown = " ".join(_shown(p) for p in written)
        print(f"next: commit them (a session starts from your last commit): git add {shown} && git commit -m "
              f"'kernelpilot starter'")
    print(f"then: set `model` in kernelpilot.toml (or KERNELPILOT_MODEL), and run `kernelpilot{target}`; without a "
          f"model, `kernelpilot{target}` evaluates each save of {_shown(written[-1].parent)}/ in its session's "
          "worktree.")
    return 0


def _needs_repository(directory: Path, git_init: bool) -> bool:
    """True when ``--git-init`` must make the repository; a WorkspaceError (nothing written) when ``directory``
    is in none and ``--git-init`` was not given: every session works on a branch of the engineer's repository."""
    here = directory.absolute()
    existing = next((d for d in (here, *here.parents) if d.exists()), Path(here.anchor))
    if find_git_root(existing.resolve()) is not None:
        return False
    if git_init:
        return True
    raise WorkspaceError(f"{here} is not inside a git repository, and kernelpilot works on a branch of your "
                         "repository; run `git init` there first (then commit what init writes), or pass --git-init "
                         f"to have init run `git init` and commit the starter files (nothing was written).")


def _git_init_and_commit(directory: Path, written: list[Path]) -> None:
    """``git init`` in ``directory`` and one commit of the files init wrote."""
    import subprocess

    def git(*command: str) -> None:
        done = subprocess.run(["git", *command], cwd=directory, capture_output=True, text=True)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            hint = ("set `git config user.name` and `git config user.email`, then " if "identity" in done.stderr
                    or "who you are" in done.stderr else "")
            raise WorkspaceError(f"`git {command[0]}` failed in {directory.resolve()}: {said}; the starter files are "
                                 f"written: {hint}commit them yourself "
                                 "(`git add -A && git commit -m 'kernelpilot starter'`).")

    git("init", "-q")
    git("add", "--", *(str(p.resolve().relative_to(directory.resolve())) for p in written))
    git("commit", "-q", "-m", "kernelpilot init: starter problem, config and candidate")


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def commented_template(problem: str, candidate_dir: str) -> str:
    """A ``kernelpilot.toml`` naming ``problem`` with every other key present but commented out."""
    d = ProjectConfig(root=Path("."))
    tol = "\n".join(f"# {k} = [{a:g}, {r:g}]" for k, (a, r) in d.tolerances.items())
    nerr = "\n".join(f"# {k} = {v:g}" for k, v in d.max_normalized_error.items())
    return f"""# kernelpilot project configuration (every key is optional; see kernelpilot's docs/configuration.md).
# Paths are relative to this file.

problem = "{problem}"
candidate_dir = "{candidate_dir}"

# LLM (litellm model string) and, for self-hosted servers, its base URL.
# model = "anthropic/claude-sonnet-4-5"
# api_base = "http://localhost:8000/v1"

# Budgets per session.
# max_turns = {d.max_turns}
# max_tokens = {d.max_tokens}
# max_cost_usd = {d.max_cost_usd:g}
# max_wall_s = {d.max_wall_s:g}

# Evaluation.
# compile_mode = "{d.compile_mode}"   # or "max-autotune"
# trials = {d.trials}
# timeout_s = {d.timeout_s:g}
# cuda_graphs = false
# allowed_libraries = ["cublas", "cudnn"]
# relaxed_policy = []

# [tolerances]   # dtype = [atol, rtol]
{tol}

# [max_normalized_error]   # dtype = bound on ||out - ref64|| / ||ref64||
{nerr}

# [[extra_shapes]]   # verify on more shapes: one shape per tensor input, or a Python expression
# name = "odd_rows"
# inputs = [[3, 5000]]

# [keys]   # TUI key bindings: action = "key"
# approve = "a"
# reject = "r"
"""
