"""Where an extracted problem came from, in a line or two for the problem card and `kernelpilot run`
(reads ``origin.json`` beside the problem; imports neither torch nor the UI)."""

from __future__ import annotations

import json
from pathlib import Path


def _origin(problem: Path) -> dict[str, object] | None:
    try:
        data = json.loads((Path(problem).parent / "origin.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kind") in ("module", "chain") else None


def origin_line(problem: Path) -> str:
    """``model.layers.3.mlp (LlamaMLP) of train.py`` (a chain: its calls too), or "" for other problems."""
    origin = _origin(problem)
    if origin is None:
        return ""
    where = f"model.{origin['path']}" if origin.get("path") else "model"
    paths = origin.get("paths") or []
    more = f" and {len(paths) - 1} more like it" if isinstance(paths, list) and len(paths) > 1 else ""
    what = f"the chain {origin.get('chain')} in {where}" if origin["kind"] == "chain" else where
    return f"{what} ({origin.get('class', '')}){more} of {Path(str(origin.get('script', '?'))).name}"


def apply_command(problem: Path) -> str:
    """The command that swaps an approved kernel of this problem into its script, or ""."""
    origin = _origin(problem)
    if origin is None:
        return ""
    return f"kernelpilot apply {origin.get('script', 'SCRIPT')} --kernels {Path(problem).parent.parent}"
