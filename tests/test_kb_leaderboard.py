"""benchmarks/kb_leaderboard.py on a small leaderboard-shaped folder (its raw_data.json counts problems from 0,
its table from 1): the generations land on the right problems, the claims file is one the suite accepts, and
the suite's discovery pairs every generation with its problem. The leaderboard itself is fetched, never
committed (the GPU run reads it from the fetched checkout)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kernelpilot.suite.claims import parse_claims
from kernelpilot.suite.discovery import discover_jobs, discover_problems

ROOT = Path(__file__).resolve().parents[1]
RELU = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n" \
       "        return torch.relu(x)\n\n" \
       "def get_inputs():\n    return [torch.rand(4, 8)]\n\ndef get_init_inputs():\n    return []\n"
SOLUTION = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        "
            "return x.clamp_min(0)  # {tag}\n")


def _script():
    spec = importlib.util.spec_from_file_location("kb_leaderboard", ROOT / "benchmarks" / "kb_leaderboard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _board(root: Path, raw: list[dict], table: dict) -> Path:
    assets = root / "docs" / "assets"
    (assets / "problems").mkdir(parents=True)
    (assets / "raw_data.json").write_text(json.dumps(raw))
    (assets / "data.json").write_text(json.dumps(table))
    (assets / "problems" / "l1_p19.py").write_text(RELU)
    (assets / "problems" / "l2_p3.py").write_text(RELU.replace("relu", "sigmoid"))
    return root


def _entry(level: int, pid0: int, model: str, file: str, eager: float | None, compiled: float | None) -> dict:
    return {"level": level, "problem_id": pid0, "display_name": model, "model": model.split("-")[0], "file": file,
            "code": SOLUTION.replace("{tag}", file), "torch_speedup": eager, "torch_compile_speedup": compiled}


def test_published_solutions_become_a_generation_folder_with_claims(tmp_path: Path) -> None:
    raw = [_entry(1, 18, "gpt-o1", "b1", 1.25, 0.8), _entry(1, 18, "claude-3.5-sonnet", "a1", 0.5, None),
           _entry(2, 2, "gpt-4o", "c1", None, None),  # not in the table: placed by the offset the others show
           _entry(1, 18, "llama-3.1-70b", "d1", 2.0, 1.1)]
    table = {"Level 1: 19_ReLU": [{"display_name": "gpt-o1", "torch_speedup": 1.25, "file": "b1"},
                                  {"display_name": "llama-3.1-70b", "torch_speedup": 2.0, "file": "d1"}],
             "Level 2: 3_Sigmoid": []}
    board = _board(tmp_path / "board", raw, table)
    out = tmp_path / "out"
    assert _script().main(["--leaderboard", str(board), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    got = {e["generation"]: (e["problem"], e["model"]) for e in manifest["generations"]}
    assert got == {  # samples of a problem by model name
        "level_1_problem_19_sample_0_kernel.py": ("level1/19_ReLU", "claude-3.5-sonnet"),
        "level_1_problem_19_sample_1_kernel.py": ("level1/19_ReLU", "gpt-o1"),
        "level_1_problem_19_sample_2_kernel.py": ("level1/19_ReLU", "llama-3.1-70b"),
        "level_2_problem_3_sample_0_kernel.py": ("level2/3_Sigmoid", "gpt-4o"),
    }
    assert "# b1" in (out / "generations" / "level_1_problem_19_sample_1_kernel.py").read_text()
    assert (out / "KernelBench" / "level1" / "19_ReLU.py").read_text() == RELU
    claims = parse_claims(out / "claims.csv")
    assert [(c.problem, c.sample, c.x_eager, c.x_compile, c.gpu) for c in claims] == [
        ("level1/19_ReLU", 0, 0.5, None, "NVIDIA L40S"), ("level1/19_ReLU", 1, 1.25, 0.8, "NVIDIA L40S"),
        ("level1/19_ReLU", 2, 2.0, 1.1, "NVIDIA L40S")]  # gpt-4o claimed nothing: no row
    jobs = discover_jobs(discover_problems([out / "KernelBench"]), out / "generations")
    assert sorted((j.problem.key, j.sample) for j in jobs) == [("level1/19_ReLU", 0), ("level1/19_ReLU", 1),
                                                                ("level1/19_ReLU", 2), ("level2/3_Sigmoid", 0)]


def test_ids_that_do_not_map_by_one_offset_stop_the_script(tmp_path: Path) -> None:
    raw = [_entry(1, 18, "gpt-o1", "b1", 1.0, 1.0), _entry(1, 19, "gpt-4o", "e1", 1.0, 1.0)]
    table = {"Level 1: 19_ReLU": [{"display_name": "gpt-o1", "file": "b1"}, {"display_name": "gpt-4o", "file": "e1"}]}
    board = _board(tmp_path / "board", raw, table)
    with pytest.raises(SystemExit, match="offset"):
        _script().main(["--leaderboard", str(board), "--out", str(tmp_path / "out")])
