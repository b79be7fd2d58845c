"""benchmarks/kb_generations.py on a small KernelBench-shaped checkout: the layout the suite reads, a
manifest entry per file, every file a candidate of the kind its pattern needs, none refused before running
under KernelBench's rules."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from kernelpilot.evaluation.candidate import load_candidate
from kernelpilot.evaluation.policy import check_candidate
from kernelpilot.suite.discovery import discover_jobs, discover_problems

ROOT = Path(__file__).resolve().parents[1]
RELU = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n" \
       "        super(Model, self).__init__()\n\n    def forward(self, x):\n        return torch.relu(x)\n\n" \
       "def get_inputs():\n    return [torch.rand(4, 8)]\n\ndef get_init_inputs():\n    return []\n"
LINEAR = RELU.replace("super(Model, self).__init__()", "super(Model, self).__init__()\n        self.fc = nn.Linear(8, 3)") \
             .replace("torch.relu(x)", "self.fc(x)")


def test_generations_in_the_suites_layout(tmp_path: Path) -> None:
    checkout = tmp_path / "KernelBench"
    (checkout / "KernelBench" / "level1").mkdir(parents=True)
    (checkout / "KernelBench" / "level2").mkdir()
    (checkout / "KernelBench" / "level1" / "19_ReLU.py").write_text(RELU)
    (checkout / "KernelBench" / "level2" / "7_Linear.py").write_text(LINEAR)
    spec = importlib.util.spec_from_file_location("kb_generations", ROOT / "benchmarks" / "kb_generations.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tmp_path / "runs" / "model"
    assert gen.main(["--kernelbench", str(checkout), "--out", str(out), "--levels", "1,2", "--corpus", str(tmp_path / "corpus")]) == 0
    manifest = json.loads((out / "expected.json").read_text())
    names = sorted(p.name for p in out.glob("level_*_problem_*_sample_*_kernel.py"))
    assert sorted(e["file"] for e in manifest["files"]) == names
    patterns = {e["pattern"] for e in manifest["files"]}
    assert patterns == {"cuda_top", "cuda_init", "cuda_first_forward", "cuda_fp16", "pytorch_rewrite", "cached_output",
                        "fp16_compute", "try_fallback"}
    jobs = discover_jobs(discover_problems([checkout]), out)
    assert {j.candidate.name for j in jobs if j.candidate} == set(names)  # the suite finds every file
    for e in manifest["files"]:
        f = out / e["file"]
        kind = load_candidate(f).kind
        assert kind == ("single_file" if e["pattern"].startswith("cuda") or e["pattern"] == "try_fallback" else "pytorch")
        assert not [x for x in check_candidate(f, rules="kernelbench") if x.severity == "reject"], e["file"]
    corpus = json.loads((tmp_path / "corpus" / "expected.json").read_text())
    assert all((tmp_path / "corpus" / e["generation_name"]).is_file() for e in corpus["files"])
