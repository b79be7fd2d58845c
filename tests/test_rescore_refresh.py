"""benchmarks/rescore_refresh.py: a re-scoring work folder brought up to today's files. A generation folder is
rewritten only when its generator, checkout or arguments changed; the names of files whose bytes changed come
back, and their verdicts are taken out of a run (kept in redone.jsonl) so that --resume judges them again."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from kernelpilot.suite.discovery import Job, ProblemRef
from kernelpilot.suite.store import Store

ROOT = Path(__file__).resolve().parents[1]
RNN = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
       "        super(Model, self).__init__()\n        self.fc = nn.Linear(16, 8)\n"
       "        self.hidden = torch.randn(4, 8)  # a plain attribute, not a buffer\n\n"
       "    def forward(self, x):\n        self.hidden = torch.tanh(self.fc(torch.cat((x, self.hidden), dim=1))[:, "
       ":8])\n        return self.hidden\n\n"
       "def get_inputs():\n    return [torch.rand(4, 8)]\n\ndef get_init_inputs():\n    return []\n")


def _module(name: str):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _checkout(tmp: Path) -> Path:
    checkout = tmp / "kb"
    (checkout / "KernelBench" / "level3").mkdir(parents=True)
    (checkout / "KernelBench" / "level1").mkdir()  # a checkout's layout (no level-1 problem needed)
    (checkout / "KernelBench" / "level3" / "33_VanillaRNN.py").write_text(RNN)
    (checkout / "COMMIT").write_text("0123456\n")
    return checkout


def test_a_folder_is_rewritten_only_when_its_sources_change(tmp_path: Path) -> None:
    refresh = _module("rescore_refresh")
    checkout, folder = _checkout(tmp_path), tmp_path / "work" / "generations"
    args = ["--problems", "1", "--fallbacks", "0", "--elementwise", "0", "--levels", "3"]
    first = refresh.refresh_folder(folder, checkout, args)
    names = sorted(p.name for p in folder.glob("level_*_kernel.py"))
    assert first == names and len(names) == 3  # pytorch_rewrite, cached_output, fp16_compute
    assert refresh.refresh_folder(folder, checkout, args) is None  # stamp matches: left alone
    (folder / names[0]).write_text("# edited by hand\n")
    assert refresh.refresh_folder(folder, checkout, args) is None  # only the stamp decides
    (checkout / "COMMIT").write_text("89abcde\n")  # another checkout: written afresh, the edited file restored
    assert refresh.refresh_folder(folder, checkout, args) == [names[0]]
    assert sorted(p.name for p in folder.glob("level_*_kernel.py")) == names


def test_the_fp16_pattern_halves_tensors_kept_as_plain_attributes(tmp_path: Path) -> None:
    """The H100 folder run of 2026-12-05: level3/33_VanillaRNN's fp16_compute raised (its hidden state, a plain
    tensor attribute, stayed fp32 and met fp16 weights): a runtime error of the generated file, not the pattern."""
    import torch

    refresh = _module("rescore_refresh")
    checkout, folder = _checkout(tmp_path), tmp_path / "gen"
    refresh.refresh_folder(folder, checkout,
                           ["--problems", "1", "--fallbacks", "0", "--elementwise", "0", "--levels", "3"])
    entry = next(e for e in json.loads((folder / "expected.json").read_text())["files"]
                 if e["pattern"] == "fp16_compute")
    spec = importlib.util.spec_from_file_location("fp16_rnn", folder / entry["file"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    ref = mod._Reference()
    torch.manual_seed(0)
    new = mod.ModelNew()
    x = torch.rand(4, 8)
    out = new(x)
    assert out.dtype == torch.float32 and torch.allclose(out, ref(x), atol=2e-2)


def test_the_corpus_copy_and_taking_out_verdicts(tmp_path: Path) -> None:
    refresh = _module("rescore_refresh")
    corpus = tmp_path / "work" / "corpus"
    manifest = json.loads((ROOT / "tests" / "data" / "generations" / "expected.json").read_text())
    assert sorted(refresh.refresh_corpus(corpus)) == sorted(e["generation_name"] for e in manifest["files"])
    assert refresh.refresh_corpus(corpus) == []
    one = manifest["files"][0]["generation_name"]
    (corpus / one).write_text("# stale\n")
    (corpus / "level_9_problem_9_sample_9_kernel.py").write_text("# gone from the corpus\n")
    assert refresh.refresh_corpus(corpus) == [one, "level_9_problem_9_sample_9_kernel.py"]
    assert not (corpus / "level_9_problem_9_sample_9_kernel.py").exists()
    # a run that judged two of the files: the changed one's verdict is taken out, kept in redone.jsonl
    run = tmp_path / "work" / "corpus-kernelbench"
    store = Store(run)
    jobs = [Job(ProblemRef("level1/19_ReLU", tmp_path / "19_ReLU.py", 1, 19), corpus / e["generation_name"], i)
            for i, e in enumerate(manifest["files"][:2])]
    store.plan(jobs)
    for job in jobs:
        store.add(job, None, status="ok")
    store.close()
    taken = refresh.take_out(run, {one}, "its file changed since it was judged")
    assert [t["job"] for t in taken] == [jobs[0].key]
    store = Store(run)
    assert store.finished() == {jobs[1].key} and len(store.planned_jobs()) == 2
    store.close()
    kept = [json.loads(line) for line in (run / "redone.jsonl").read_text().splitlines()]
    assert [(k["job"], k["status"], k["why"])
            for k in kept] == [(jobs[0].key, "ok", "its file changed since it was judged")]
