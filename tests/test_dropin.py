"""Approved kernels of extracted problems as drop-in operators: the registration (custom op, fake,
backward, gradient check against float64), torch.compile and torch.export on the CPU, the approval
hook in a real git repository, `kernelpilot apply` and its --write commit."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

DATA = Path(__file__).parent / "data"
SCRIPT = DATA / "hotspots" / "tiny_llama.py"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def extract_mlp(out: Path, script: Path = SCRIPT) -> Path:
    from kernelpilot.profiling.grouped import grouped_command

    args = SimpleNamespace(script=str(script), script_args=[], steps=3, top=10, extract=None, out=str(out),
                           group="module", depth=3, weights=False, compile_check=False)
    args.extract = "(MLP)"
    assert grouped_command(args) == 0
    (directory,) = [d for d in out.iterdir() if d.name.endswith("_mlp")]
    return directory


@pytest.fixture(scope="module")
def mlp_problem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_mlp(tmp_path_factory.mktemp("problems"))


def with_candidate(problem: Path, tmp: Path, scale: str = "1.0", source: str = "mlp_candidate.py",
                   knob: str = "SCALE") -> Path:
    """A copy of ``problem`` with tests/data/dropin/``source`` as its candidate, ``knob = scale`` in it."""
    directory = tmp / problem.name
    shutil.copytree(problem, directory)
    (directory / "candidate").mkdir()
    text = (DATA / "dropin" / source).read_text().replace(f"{knob} = 1.0", f"{knob} = {scale}")
    (directory / "candidate" / "model_new.py").write_text(text)
    return directory


def load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"dropin_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_registration_compiles_exports_and_trains(mlp_problem: Path, tmp_path: Path) -> None:
    import torch

    from kernelpilot.dropin.registration import write_registration

    directory = with_candidate(mlp_problem, tmp_path)
    reg = write_registration(directory / "candidate", candidate_id="c1")
    assert reg.training and reg.gradient.startswith("passed on cpu"), reg.gradient
    assert "import kernelpilot" not in (directory / "candidate" / "dropin.py").read_text()
    dropin = load(directory / "candidate" / "dropin.py")
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import tiny_llama
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    model = tiny_llama.TinyLlama()
    tokens = torch.randint(0, 96, (2, 7))
    ref = model(tokens)
    ref.sum().backward()
    ref_grad = model.layers[1].mlp.up.weight.grad.clone()
    assert dropin.install(model) == ["layers.0.mlp", "layers.1.mlp"]  # type: ignore[attr-defined]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)  # a graph break would raise
    out = compiled(tokens)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    torch.testing.assert_close(model.layers[1].mlp.up.weight.grad, ref_grad, rtol=1e-5, atol=1e-6)
    assert model.layers[0].mlp.forward.kernelpilot_stats["compiled_kernel"] == 1  # traced into the graph
    exported = torch.export.export(model, (tokens,))
    ops = [n.target for n in exported.graph.nodes if "kernelpilot" in str(n.target)]
    assert len(ops) == 2
    # the fake implementation alone: shapes from the reference on fake tensors, no kernel run
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = [torch.randn(2, 7, 32), *(p.detach() for p in model.layers[0].mlp.parameters())]
    with FakeTensorMode() as mode:
        x, *params = [mode.from_tensor(t) for t in real]
        fake_out = dropin.op(x, *params)  # type: ignore[attr-defined]
    assert tuple(fake_out.shape) == (2, 7, 32)


TRITON_DROPIN = r"""
import json, sys
from pathlib import Path
import torch
from kernelpilot.dropin.registration import write_registration
sys.path.insert(0, sys.argv[2])
import test_dropin as t
import tiny_llama
reg = write_registration(Path(sys.argv[1]) / "candidate", candidate_id="c1")
dropin = t.load(Path(sys.argv[1]) / "candidate" / "dropin.py")
torch.manual_seed(0)
model = tiny_llama.TinyLlama()
tokens = torch.randint(0, 96, (2, 7))
ref = model(tokens)
ref.sum().backward()
ref_grad = model.layers[1].mlp_norm.weight.grad.clone()
swapped = dropin.install(model)
model.zero_grad()
out = torch.compile(model, fullgraph=True)(tokens)  # a graph break would raise
out.sum().backward()
print(json.dumps({"gradient": reg.gradient, "swapped": swapped, "opaque": dropin.OPAQUE,
                  "out": float((out - ref).abs().max()),
                  "grad": float((model.layers[1].mlp_norm.weight.grad - ref_grad).abs().max()),
                  "compiled": model.norm.forward.kernelpilot_stats["compiled_kernel"]}))
"""


def test_a_triton_dropin_compiles_whole_under_tritons_interpreter(mlp_problem: Path, tmp_path: Path) -> None:
    """A Triton candidate's drop-in on the CPU (TRITON_INTERPRET=1): the interpreter's kernels are not ones
    torch.library.wrap_triton knows, so a triton_op would run them on torch.compile's fake tensors ("Cannot access
    data pointer"; apply --compile's dry run on the CPU, 2026-12-07); the operator is opaque there, and a model with
    it compiles as one graph, its outputs and gradients the model's own."""
    import json
    import os

    pytest.importorskip("triton")
    from kernelpilot.profiling.grouped import grouped_command

    out = tmp_path / "problems"
    args = SimpleNamespace(script=str(SCRIPT), script_args=[], steps=3, top=10, extract="(RMSNorm)", out=str(out),
                           group="module", depth=3, weights=False, compile_check=False)
    assert grouped_command(args) == 0
    (problem,) = [d for d in out.iterdir() if d.name.endswith("_rmsnorm")]
    directory = with_candidate(problem, tmp_path, source="rmsnorm_triton.py")
    proc = subprocess.run([sys.executable, "-c", TRITON_DROPIN, str(directory), str(SCRIPT.parent)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1",
                               "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent),
                                                              os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["gradient"].startswith("passed on cpu") and got["opaque"]
    assert len(got["swapped"]) == 5 and got["compiled"] == 1
    assert got["out"] < 1e-4 and got["grad"] < 1e-4


def test_a_wrong_kernel_fails_the_gradient_check_and_training_stops(mlp_problem: Path, tmp_path: Path) -> None:
    import torch

    from kernelpilot.dropin.registration import write_registration

    directory = with_candidate(mlp_problem, tmp_path, scale="1.01")
    reg = write_registration(directory / "candidate", candidate_id="c2")
    assert not reg.training and "output 0" in reg.gradient
    dropin = load(directory / "candidate" / "dropin.py")
    x = torch.randn(2, 7, 32, requires_grad=True)
    params = [torch.randn(64, 32, requires_grad=True), torch.randn(64, 32), torch.randn(32, 64)]
    out = dropin.op(x, *params)  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="did not match the float64 reference"):
        out.sum().backward()


def test_approval_writes_the_dropin_in_the_same_commit(mlp_problem: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.landing import approve
    from kernelpilot.workspace import Workspace

    monkeypatch.setenv("KERNELPILOT_DATA_DIR", str(tmp_path / "data"))
    repo = tmp_path / "user"
    (repo / "problems").mkdir(parents=True)
    shutil.copytree(mlp_problem, repo / "problems" / mlp_problem.name)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test User")
    git(repo, "config", "user.email", "user@example.com")
    git(repo, "config", "commit.gpgsign", "false")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "extracted")
    rel = f"problems/{mlp_problem.name}"
    ws = Workspace.open(repo, "s1", candidate_dir=f"{rel}/candidate", problem=f"{rel}/problem.py")
    ws.write_file(f"{rel}/candidate/model_new.py", (DATA / "dropin" / "mlp_candidate.py").read_text())
    ws.checkpoint("c1", "ok: 1.3x torch.compile", {"status": "ok", "mode": "benchmark"})
    before = git(repo, "rev-parse", "HEAD")
    new = approve(ws, "c1")
    assert git(repo, "rev-parse", "HEAD") == new and git(repo, "rev-parse", f"{new}^") == before  # one commit
    files = git(repo, "show", "--name-only", "--format=", new).splitlines()
    assert sorted(files) == sorted(f"{rel}/candidate/{n}"
                                   for n in ("model_new.py", "dropin.py", "dropin_swap.py", ".gitignore"))
    assert git(repo, "status", "--porcelain") == ""
    assert any("kernelpilot apply" in n and "training too" in n for n in ws.notes), ws.notes


def test_apply_measures_and_write_commits(mlp_problem: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.dropin.apply_command import apply_command
    from kernelpilot.dropin.registration import write_registration

    repo = tmp_path / "user"
    repo.mkdir()
    # the MLP's eager forward made slow by a sleep, so that the swap, which replaces that forward, is faster on
    # any CPU (--write installs only swaps that did not make the step slower)
    slow = "        time.sleep(0.003)  # a slow eager MLP\n        return self.down(F.silu(self.gate(x)) * self.up(x))"
    source = SCRIPT.read_text()
    assert "        return self.down(F.silu(self.gate(x)) * self.up(x))" in source
    (repo / "tiny_llama.py").write_text("import time\n" + source.replace(
        "        return self.down(F.silu(self.gate(x)) * self.up(x))", slow))
    problems = repo / "problems"
    problems.mkdir()
    directory = with_candidate(mlp_problem, problems)
    assert write_registration(directory / "candidate", candidate_id="c1").training
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test User")
    git(repo, "config", "user.email", "user@example.com")
    git(repo, "config", "commit.gpgsign", "false")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "approved")
    args = SimpleNamespace(script=str(repo / "tiny_llama.py"), script_args=[], kernels=str(problems), steps=20,
                           compile=False, write=False, yes=True)
    assert apply_command(args) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("model.layers.0.mlp (+1)"))
    assert row.rstrip().endswith("ok") and "yardstick" in out and "nothing was changed" in out
    # the step times come from runs without timing hooks; the parts from runs of their own, before -> after
    assert re.search(r" (within|faster|slower) +\d+\.\d{3} -> \d+\.\d{3} ", row), row
    assert "as it is, again after the swaps" in out and re.search(r"^as it is +\d", out, re.M)
    assert git(repo, "status", "--porcelain") == ""
    args.write = True
    before = git(repo, "rev-parse", "HEAD")
    assert apply_command(args) == 0
    out = capsys.readouterr().out
    assert "+    install(model)" in out  # the diff was shown
    assert "written: model.layers.0.mlp (+1)" in out
    assert git(repo, "rev-parse", "HEAD^") == before and git(repo, "status", "--porcelain") == ""
    changed = sorted(git(repo, "show", "--name-only", "--format=", "HEAD").splitlines())
    assert changed == ["kernelpilot_kernels.py", "tiny_llama.py"]
    res = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.argv=['x']; import torch\n"
                          "import kernelpilot_kernels as k\nsys.path.insert(0, '.')\nimport tiny_llama\n"
                          "m = tiny_llama.TinyLlama(); print(k.install(m))"], cwd=repo, capture_output=True, text=True,
                         timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo), "HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "['layers.0.mlp', 'layers.1.mlp']" in res.stdout


def test_apply_reports_a_swap_that_does_not_match(mlp_problem: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.dropin.apply_command import apply_command
    from kernelpilot.dropin.registration import write_registration

    script = tmp_path / "tiny_llama.py"
    script.write_text(SCRIPT.read_text().replace("(2, 8)", "(2, 9)"))  # sequence 8, not the recorded 7
    directory = with_candidate(mlp_problem, tmp_path / "problems")
    write_registration(directory / "candidate", candidate_id="c1", check=False)
    args = SimpleNamespace(script=str(script), script_args=[], kernels=str(tmp_path / "problems"), steps=3,
                           compile=False, write=False, yes=True)
    assert apply_command(args) == 1
    out = capsys.readouterr().out
    assert "no call of model.layers.0.mlp, model.layers.1.mlp matched the recorded shapes" in out
    assert "left out: model.layers.0.mlp (+1)" in out


def test_a_chain_is_swapped_through_its_holder(tmp_path: Path) -> None:
    import torch

    from kernelpilot.dropin.registration import write_registration
    from kernelpilot.profiling.grouped import grouped_command

    out = tmp_path / "problems"
    args = SimpleNamespace(script=str(SCRIPT), script_args=[], steps=3, top=20, extract=None, out=str(out),
                           group="fusion", depth=3, weights=False, compile_check=False)
    args.extract = ": silu -> mul"  # a row by name: host-clock rankings move between runs
    assert grouped_command(args) == 0
    (directory,) = out.iterdir()
    (directory / "candidate").mkdir()
    (directory / "candidate" / "model_new.py").write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x0, x1):\n        return F.silu(x0) * x1\n")  # SiLU's output: autograd's, not returned
    assert write_registration(directory / "candidate", candidate_id="c1").training
    dropin = load(directory / "candidate" / "dropin.py")
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import tiny_llama
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    model = tiny_llama.TinyLlama()
    tokens = torch.randint(0, 96, (2, 7))
    ref = model(tokens)
    ref.sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    assert dropin.install(model) == ["layers.0.mlp", "layers.1.mlp"]  # type: ignore[attr-defined]
    # the swapped forward's module and the holder's are importable by name, as torch 2.11's Dynamo needs
    assert model.layers[0].mlp.forward.__module__ in sys.modules
    assert any(n.startswith("kp_holder_") and hasattr(m, "forward") for n, m in list(sys.modules.items()))
    got = torch.compile(model, fullgraph=True)(tokens)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    got.sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[name], rtol=1e-4, atol=1e-6)
    assert model.layers[1].mlp.forward.kernelpilot_stats["compiled_kernel"] == 1  # traced into the graph


def test_an_approved_candidate_passes_the_policy_again(mlp_problem: Path, tmp_path: Path) -> None:
    """What approval writes beside the candidate (dropin.py imports os, json, importlib ...; a CUDA
    drop-in's _build/ holds a .so) is kernelpilot's, not the candidate's: a later session's evaluation of
    the approved candidate is not refused for it, and the candidate cannot import it either."""
    from kernelpilot.dropin.registration import write_registration
    from kernelpilot.evaluation.static.policy import blocking, check_candidate

    directory = with_candidate(mlp_problem, tmp_path)
    candidate = directory / "candidate"
    assert blocking(check_candidate(candidate)) == []
    write_registration(candidate, candidate_id="c1", check=False)
    (candidate / "_build").mkdir()
    (candidate / "_build" / "ext.so").write_bytes(b"\x7fELF")
    assert blocking(check_candidate(candidate)) == []
    model = candidate / "model_new.py"
    model.write_text("import dropin\n" + model.read_text())
    assert [f.rule for f in blocking(check_candidate(candidate))] == ["import-dropin"]
    loose = tmp_path / "loose"  # not an extracted problem's candidate: every file is the candidate's
    shutil.copytree(candidate, loose)
    assert "import-os" in {f.rule for f in blocking(check_candidate(loose))}


def test_apply_under_compile_compiles_the_swapped_model_once(mlp_problem: Path, tmp_path: Path) -> None:
    """The swap's call counts and apply's timing hooks ran inside the compiled forward: Dynamo guarded on
    them and recompiled the whole model at every step (then ran it eagerly past its recompile limit)."""
    import torch

    from kernelpilot.dropin.apply_run import measure
    from kernelpilot.dropin.registration import write_registration

    directory = with_candidate(mlp_problem, tmp_path / "problems")
    assert write_registration(directory / "candidate", candidate_id="c1").training
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    dropin = directory / "candidate" / "dropin.py"
    res = measure(SCRIPT, [], steps=4, warmup=1, dropins=[dropin], compile_root=True)
    assert not res.error and len(res.step_ms) == 5
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 2  # forward (+ the loss's, if any)
    assert res.stats[str(dropin)]["compiled_kernel"] and res.part_ms == {}
