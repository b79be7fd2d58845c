"""``kernelpilot init``: a starter KernelBench problem (row softmax, bf16) and a commented kernelpilot.toml;
``kernelpilot init --from-inductor PATH``: torch.compile's kernels for a problem (or every problem of a folder
or KernelBench checkout, into the suite's solutions layout) as Triton candidates."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from kernelpilot.config import ProjectConfig
from kernelpilot.errors import KernelpilotError

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


def init_project(directory: Path, name: str = "softmax", force: bool = False) -> list[Path]:
    """Write ``<directory>/<name>.py`` and ``<directory>/kernelpilot.toml``; returns the paths written."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise KernelpilotError(f"problem name {name!r} is not a valid Python module name; use letters, digits and underscores.")
    if directory.exists() and not directory.is_dir():
        raise KernelpilotError(f"{directory} exists and is not a directory; pass a project directory.")
    problem = directory / f"{name}.py"
    config = directory / "kernelpilot.toml"
    existing = [p for p in (problem, config) if p.exists()]
    if existing and not force:
        names = " and ".join(str(p) for p in existing)
        raise KernelpilotError(f"{names} already exist{'s' if len(existing) == 1 else ''}; pass --force to overwrite, or choose another --problem name or directory.")
    directory.mkdir(parents=True, exist_ok=True)
    problem.write_text(STARTER_PROBLEM, encoding="utf-8")
    config.write_text(commented_template(problem.name, f"kernels/{name}"), encoding="utf-8")
    return [problem, config]


def inductor_command(problem: str, target: Path, compile_mode: str = "default", recording: Path | None = None,
                     helpers: Path | None = None) -> int:
    """``kernelpilot init --from-inductor PROBLEM``: torch.compile's kernels as a Triton candidate."""
    from kernelpilot.inductor import ConversionError

    if target.exists() and any(target.iterdir()):
        raise KernelpilotError(f"{target} is not empty; pass --out with a new directory, or remove it.")
    helper_text = _read(helpers, "--helpers") if helpers else None
    try:
        if recording is None:
            from kernelpilot.inductor.generate import inductor_candidate

            conversion = inductor_candidate(problem, target, compile_mode)
        else:
            from kernelpilot.inductor import candidate_from_recording, write_candidate

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
    from kernelpilot.inductor import ConversionError
    from kernelpilot.inductor.batch import INDEX, convert_all, discover, record_all

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
                                          float(getattr(args, "timeout", 300.0)), _levels(getattr(args, "levels", None)))
        stem = source.stem
        name = source.resolve().parent.name if stem == "problem" else stem
        target = Path(args.out) if args.out else directory / "kernels" / f"{name}-inductor"
        if recordings is not None and recordings.is_dir():
            from kernelpilot.inductor.batch import discover

            recordings = recordings / f"{discover([source])[0].key}.json"
        return inductor_command(args.from_inductor, target, recording=recordings, helpers=helpers)
    written = init_project(directory, args.problem, args.force)
    for path in written:
        print(f"wrote {path}")
    target = "" if directory.resolve() == Path.cwd().resolve() else f" {directory}"
    print(f"next: set `model` in kernelpilot.toml (or KERNELPILOT_MODEL), then run `kernelpilot{target}`.", file=sys.stdout)
    return 0


def commented_template(problem: str, candidate_dir: str) -> str:
    """A ``kernelpilot.toml`` naming ``problem`` with every other key present but commented out."""
    d = ProjectConfig(root=Path("."))
    tol = "\n".join(f"# {k} = [{a:g}, {r:g}]" for k, (a, r) in d.tolerances.items())
    nerr = "\n".join(f"# {k} = {v:g}" for k, v in d.max_normalized_error.items())
    return f"""# kernelpilot project configuration (every key is optional; see README.md, "Configuration").
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
