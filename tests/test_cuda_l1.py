"""benchmarks/cuda_l1.py on a small CUDA-L1-shaped release (one JSON object per line, per GPU): each GPU's program
is one sample of its problem, the problem file is the solutions' ref_code named as in the KernelBench checkout,
empty programs are skipped with a reason, the claims name their GPU and parse as the suite reads them; and
benchmarks/rescore_gpu.py's --published checks what it is given before any run starts. CUDA-L1 itself is fetched,
never committed."""

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
SIGMOID = RELU.replace("relu", "sigmoid")
SOLUTION = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        "
            "return x.clamp_min(0)  # {tag}\n")


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(level: int, task: int, ref: str, code: str | None, eager: float | None, compiled: float | None) -> str:
    return json.dumps({"level_id": level, "task_id": task, "ref_code": ref, "custom_code": code, "score_default": eager,
                       "score_torch_compile_default": compiled, "score_cuda_graph": 1.0})


def _release(root: Path) -> Path:
    folder = root / "optimized_cuda_code"
    folder.mkdir(parents=True)
    (folder / "h100.json").write_text("\n".join([
        _row(1, 19, RELU, SOLUTION.replace("{tag}", "h100"), 1.5, 1.2),
        _row(2, 3, SIGMOID + "# sizes of another version\n", SOLUTION.replace("{tag}", "h100 l2"), 2.0, None),
        _row(1, 20, RELU, None, None, None),  # nothing faster found
        _row(1, 19, RELU, "None", 1.0, 1.0).replace('"level_id": 1', '"level_id": 3'),  # the same, as a string
    ]) + "\n")
    (folder / "h20.json").write_text(_row(1, 19, RELU, SOLUTION.replace("{tag}", "h20"), 0.9, 0.7) + "\n\n")
    return root


def _checkout(root: Path) -> Path:
    for rel, text in (("level1/19_ReLU.py", RELU), ("level1/20_LeakyReLU.py", RELU), ("level2/3_Sigmoid.py", SIGMOID),
                      ("level3/19_MobileNetV1.py", RELU)):
        (root / "KernelBench" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "KernelBench" / rel).write_text(text)
    return root


def test_each_gpu_is_a_sample_with_its_claims(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _script("cuda_l1").main(["--cuda-l1", str(_release(tmp_path / "cl1")), "--kernelbench",
                                    str(_checkout(tmp_path / "kb")), "--out", str(out), "--gpus", "h100,h20"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    got = {e["generation"]: (e["problem"], e["gpu"]) for e in manifest["generations"]}
    assert got == {"level_1_problem_19_sample_0_kernel.py": ("level1/19_ReLU", "NVIDIA H100 SXM"),
                   "level_2_problem_3_sample_0_kernel.py": ("level2/3_Sigmoid", "NVIDIA H100 SXM"),
                   "level_1_problem_19_sample_1_kernel.py": ("level1/19_ReLU", "NVIDIA H20")}
    assert "# h20" in (out / "generations" / "level_1_problem_19_sample_1_kernel.py").read_text()
    assert [s["solution"] for s in manifest["skipped"]] == ["h100 level 1 task 20", "h100 level 3 task 19"]
    assert all("no custom_code" in s["why"] for s in manifest["skipped"])
    # the problem is what the solutions were timed against, and the manifest says where it is not the checkout's file
    assert (out / "KernelBench" / "level2" / "3_Sigmoid.py").read_text().endswith("# sizes of another version\n")
    assert manifest["ref_code_is_checkout_file"] == {"level1/19_ReLU": True, "level2/3_Sigmoid": False}
    assert not (out / "KernelBench" / "level1" / "20_LeakyReLU.py").exists()
    claims = parse_claims(out / "claims.csv")
    assert sorted((c.problem, c.sample, c.x_eager, c.x_compile, c.gpu) for c in claims) == [
        ("level1/19_ReLU", 0, 1.5, 1.2, "NVIDIA H100 SXM"), ("level1/19_ReLU", 1, 0.9, 0.7, "NVIDIA H20"),
        ("level2/3_Sigmoid", 0, 2.0, None, "NVIDIA H100 SXM")]
    jobs = discover_jobs(discover_problems([out / "KernelBench"]), out / "generations")
    assert sorted((j.problem.key, j.sample) for j in jobs) == [("level1/19_ReLU", 0), ("level1/19_ReLU", 1),
                                                                ("level2/3_Sigmoid", 0)]


def test_bad_releases_stop_with_a_message(tmp_path: Path) -> None:
    cl1, kb = _release(tmp_path / "cl1"), _checkout(tmp_path / "kb")
    with pytest.raises(SystemExit, match="no optimized_cuda_code/a100.json"):
        _script("cuda_l1").main(["--cuda-l1", str(cl1), "--kernelbench", str(kb), "--out", str(tmp_path / "o"),
                                 "--gpus", "h100,a100"])
    (cl1 / "optimized_cuda_code" / "h100.json").write_text(_row(1, 19, RELU, "x", 1.0, 1.0) + "\n{not json\n")
    with pytest.raises(SystemExit, match="line 2 is not JSON"):
        _script("cuda_l1").main(["--cuda-l1", str(cl1), "--kernelbench", str(kb), "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="holds no KernelBench problem files"):
        _script("cuda_l1").main(["--cuda-l1", str(cl1), "--kernelbench", str(tmp_path), "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("given, message", [
    ("cuda-l1=X", "letters, digits and underscores"),
    ("corpus=X", "letters, digits and underscores"),
    ("nofolder", "expected NAME=DIR"),
    ("cl1={missing}", "lacks manifest.json, claims.csv, generations, KernelBench"),
])
def test_rescore_published_sets_are_checked_before_anything_runs(tmp_path: Path, capsys, given: str,
                                                                 message: str) -> None:
    args = ["--kernelbench", str(tmp_path), "--out", str(tmp_path / "out"),
            "--published", given.replace("{missing}", str(tmp_path / "none"))]
    with pytest.raises(SystemExit) as stopped:
        _script("rescore_gpu").main(args)
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_rescore_plan_names_the_published_sets_runs(tmp_path: Path, capsys) -> None:
    out = tmp_path / "set"
    _script("cuda_l1").main(["--cuda-l1", str(_release(tmp_path / "cl1")), "--kernelbench",
                             str(_checkout(tmp_path / "kb")), "--out", str(out)])
    with pytest.raises(SystemExit):
        _script("rescore_gpu").main(["--kernelbench", str(tmp_path), "--out", str(tmp_path / "o"), "--published",
                                     f"cl1={out}", "--plan", "cl1-kernelbench-v0.1,leaderboard-kernelbench"])
    err = capsys.readouterr().err
    assert "unknown runs leaderboard-kernelbench" in err and "cl1-kernelbench-v0.1" in err


def test_rescore_runs_of_one_set_share_their_baselines(tmp_path: Path) -> None:
    """A set's runs under other rule sets lend their baselines (--baselines-from); a repeat (~2) and the run itself
    do not, nor does a build."""
    rescore = _script("rescore_gpu")
    work = tmp_path / "work"
    for name in ("folder-kernelpilot", "folder-kernelbench-v0.1", "folder-kernelbench~2", "corpus-kernelpilot"):
        (work / name).mkdir(parents=True)
        (work / name / "results.sqlite").write_bytes(b"")
    (work / "folder-nothing-yet").mkdir()

    def lent(name: str, mode: str = "benchmark") -> list[str]:
        cmd = rescore.suite_command(name, ["P"], tmp_path, "kernelbench", work, tmp_path, mode)
        return [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--baselines-from"]

    assert lent("folder-kernelbench") == [str(work / "folder-kernelbench-v0.1"), str(work / "folder-kernelpilot")]
    assert lent("folder-kernelpilot") == [str(work / "folder-kernelbench-v0.1")]  # resumed: not from itself
    assert lent("folder-kernelbench~2") == [] and lent("folder-kernelbench", "build") == []


def test_rescore_resumes_a_run_with_the_files_added_since(tmp_path: Path) -> None:
    """A run whose folder gained a generation after it started is not complete: its resume plans it (--add-new)."""
    from kernelpilot.suite.discovery import Job, ProblemRef
    from kernelpilot.suite.store import Store

    rescore = _script("rescore_gpu")
    solutions = tmp_path / "gen"
    solutions.mkdir()
    first = solutions / "level_1_problem_19_sample_0_kernel.py"
    first.write_text("# a generation\n")
    run = tmp_path / "work" / "corpus-kernelbench"
    store = Store(run)
    store.plan([Job(ProblemRef("level1/19_ReLU", tmp_path / "19_ReLU.py", 1, 19), first.resolve(), 0)])
    store.close()
    assert rescore._unplanned(run, solutions) == 0
    (solutions / "level_1_problem_19_sample_1_kernel.py").write_text("# written later\n")
    assert rescore._unplanned(run, solutions) == 1
    cmd = rescore.suite_command("corpus-kernelbench", ["P"], solutions, "kernelbench", tmp_path / "work", tmp_path)
    assert cmd[3:7] == ["suite", "--resume", str(run), "--add-new"]


def test_rescore_judges_a_published_sets_chosen_samples(tmp_path: Path) -> None:
    """--published-samples 0: a published set's suite calls choose sample 0 (new run or resumed), and the run
    counts as complete once those are judged, the other samples left for later."""
    from kernelpilot.suite.discovery import Job, ProblemRef
    from kernelpilot.suite.store import Store
    from kernelpilot.verdict import Verdict

    rescore = _script("rescore_gpu")
    work = tmp_path / "work"
    new = rescore.suite_command("leaderboard-kernelbench-v0.1", ["P"], tmp_path, "kernelbench-v0.1", work, tmp_path,
                                samples=[0])
    assert new[new.index("--samples") + 1] == "0" and "--resume" not in new
    run = work / "leaderboard-kernelbench-v0.1"
    ref = ProblemRef("level1/19_ReLU", tmp_path / "19_ReLU.py", 1, 19)
    jobs = [Job(ref, tmp_path / f"s{s}.py", s) for s in (0, 1, 2)]
    store = Store(run)
    store.plan(jobs)
    store.begin(["test"])
    assert store.add(jobs[0], Verdict(status="ok", mode="benchmark"))
    store.close()
    assert rescore._planned_and_done(run) == (3, 1) and rescore._planned_and_done(run, [0]) == (1, 1)
    assert rescore._planned_and_done(run, [1, 2]) == (2, 0)
    resumed = rescore.suite_command(run.name, ["P"], tmp_path, "kernelbench-v0.1", work, tmp_path, samples=[0])
    assert "--resume" in resumed and resumed[resumed.index("--samples") + 1] == "0"
    assert rescore.run_suite(run.name, ["P"], tmp_path, "kernelbench-v0.1", work, tmp_path, deadline=0.0,
                             samples=[0]).startswith("complete (1 of 1")
    assert rescore.run_suite(run.name, ["P"], tmp_path, "kernelbench-v0.1", work, tmp_path,
                             deadline=0.0) == "skipped: no time left"
