"""``kernelpilot init``: a starter KernelBench problem (row softmax, bf16) and a commented kernelpilot.toml."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from kernelpilot.config import commented_template
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


def init_command(args: Any) -> int:
    directory = Path(args.dir)
    written = init_project(directory, args.problem, args.force)
    for path in written:
        print(f"wrote {path}")
    target = "" if directory.resolve() == Path.cwd().resolve() else f" {directory}"
    print(f"next: set `model` in kernelpilot.toml (or KERNELPILOT_MODEL), then run `kernelpilot{target}`.", file=sys.stdout)
    return 0
