"""hotspots --group module|fusion on a small CPU model (host clock), and extraction of a module and of
a chain to problem directories that load and run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

DATA = Path(__file__).parent / "data" / "hotspots"
SCRIPT = DATA / "tiny_llama.py"


@pytest.fixture(scope="module")
def traced():  # type: ignore[no-untyped-def]
    from kernelpilot.profiling.trace import record_script

    return record_script(SCRIPT, [], 3)


def test_module_groups_merge_layers_and_split_forward_backward(traced) -> None:  # type: ignore[no-untyped-def]
    from kernelpilot.profiling.module_table import module_groups, module_table

    trace, run = traced
    assert run.steps == 3 and run.grad_steps == 3
    groups = module_groups(trace, depth=3, steps=[1, 2])
    mlp = next(g for g in groups if g.cls == "MLP")
    assert mlp.paths == ["layers.0.mlp", "layers.1.mlp"] and mlp.label() == "model.layers.{0..1}.mlp"
    assert mlp.forward_ms > 0 and mlp.backward_ms > 0
    layer = next(g for g in groups if g.cls == "Layer")
    assert layer.total_ms > mlp.total_ms  # inclusive: a layer holds its MLP
    assert all(g.cls != "Linear" or g.paths == ["head"] for g in groups)  # depth 3: layers.0.mlp.up is depth 4
    deeper = module_groups(trace, depth=4, steps=[1, 2])
    assert any(g.cls == "Linear" and "layers.0.mlp.up" in g.paths for g in deeper)
    table = module_table(groups, steps=2, step_ms=10.0, clock="host clock (CPU run)")
    assert "x2  model.layers.{0..1}.mlp (MLP)" in table and "host clock" in table


def test_the_optimizer_and_the_scripts_own_calls_are_shown_beside_the_modules(traced) -> None:  # type: ignore[no-untyped-def]
    """A training step's time outside the model (AdamW's step(), the loss the script computes, gradients cleared)
    is shown, not left as the unexplained rest of the step: on Llama-3.2-1B's shapes under torch.compile, AdamW
    was 11% of the step (2026-12-07, H100)."""
    from kernelpilot.profiling.module_table import outside_modules

    trace, _run = traced
    optimizer = [o for o in trace.ops if o.phase == "optimizer" and o.step in (1, 2)]
    assert optimizer and all(not o.stack for o in optimizer)
    assert any("foreach" in o.name or "addcdiv" in o.name or "lerp" in o.name for o in optimizer)  # AdamW's update
    assert not any(o.phase == "optimizer" and o.name == "aten::_log_softmax" for o in trace.ops)  # the loss is not
    text = outside_modules(trace, steps=[1, 2], step_ms=10.0)
    assert "the optimizer's step()" in text and "% of the step" in text
    assert "the script's other calls" in text  # the cross-entropy the script computes after the model, and its backward


def test_fusion_finds_rmsnorm_and_silu_mul_with_escapes(traced) -> None:  # type: ignore[no-untyped-def]
    from kernelpilot.profiling.fusion import find_chains

    trace, _ = traced
    chains = find_chains(trace, 2)
    labels = [c.label() for c in chains]
    assert "silu -> mul" in labels
    assert "pow -> mean -> add -> rsqrt -> mul -> mul" in labels
    silu = next(c for c in chains if c.label() == "silu -> mul")
    assert silu.repeats == 2 and silu.holder == "layers.0.mlp" and silu.kind() == "elementwise"
    assert any(e.by == "saved for backward" for e in silu.escapes)  # silu's output is kept for mul's backward
    assert silu.fused_bytes < silu.unfused_bytes
    assert any(c.kind() == "matmul+epilogue" for c in chains)
    from kernelpilot.profiling.fusion import fusion_table

    table = fusion_table(chains, step_ms=10.0, clock="host clock (CPU run)")
    # every escaping intermediate is described by its dtype and shape, never by an internal value id
    assert "an intermediate (T[2, 7, 64]:float32) is saved for backward" in table and "(value " not in table


def _run_problem(directory: Path) -> str:
    code = ("import sys, torch; sys.path.insert(0, %r)\n" % str(directory) +
            "import problem as m\nmodel = m.Model(*m.get_init_inputs())\n"
            "out = model(*m.get_inputs())\nouts = out if isinstance(out, tuple) else (out,)\n"
            "print([tuple(o.shape) for o in outs])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_extract_module_with_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from kernelpilot.profiling.hotspots import hotspots_command

    args = SimpleNamespace(script=str(SCRIPT), script_args=[], steps=3, top=10, extract=None, out=str(tmp_path),
                           group="module", depth=3, weights=True, compile_check=False)
    assert hotspots_command(args) == 0
    table = capsys.readouterr().out
    assert any("(MLP)" in line for line in table.splitlines())
    args.extract = "(MLP)"  # by name: host-clock rankings move between runs
    assert hotspots_command(args) == 0
    (directory,) = tmp_path.iterdir()
    origin = json.loads((directory / "origin.json").read_text())
    assert origin["kind"] == "module" and origin["class"] == "MLP"
    assert origin["paths"] == ["layers.0.mlp", "layers.1.mlp"]
    assert set(origin["params"].values()) == {"gate.weight", "up.weight", "down.weight"} and origin["autograd"]
    weights = torch.load(directory / "weights.pt", weights_only=True)
    assert {tuple(v.shape) for v in weights.values()} == {(64, 32), (32, 64)}
    assert _run_problem(directory).strip() == "[(2, 7, 32)]"
    from kernelpilot.problem import load_problem

    problem = load_problem(directory / "problem.py")
    model = problem.load_module().Model()
    for attr, value in weights.items():  # the real values were loaded
        assert torch.equal(getattr(model, attr).detach(), value)


def test_extract_chain_with_holder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.profiling.hotspots import hotspots_command

    args = SimpleNamespace(script=str(SCRIPT), script_args=[], steps=3, top=10, extract=None, out=str(tmp_path),
                           group="fusion", depth=3, weights=False, compile_check=False)
    assert hotspots_command(args) == 0
    table = capsys.readouterr().out
    assert "unknown (CPU run)" in table and "saved for backward" in table
    assert any(line.rstrip().endswith(": silu -> mul") for line in table.splitlines())
    args.extract = ": silu -> mul"
    assert hotspots_command(args) == 0
    (directory,) = tmp_path.iterdir()
    origin = json.loads((directory / "origin.json").read_text())
    assert origin["kind"] == "chain" and origin["ops"] == ["aten::silu.default", "aten::mul.Tensor"]
    assert origin["holder"]["class"] == "MLP" and origin["paths"] == ["layers.0.mlp", "layers.1.mlp"]
    assert "kernel(" in (directory / "holder.py").read_text()
    # one output: the product; silu's output, which autograd alone keeps, is not one (the drop-in's backward,
    # its own or the reference's vjp, needs none of autograd's saved values)
    assert _run_problem(directory).strip() == "[(2, 7, 64)]"
    assert "autograd's: a kernel with a backward of its own need not write it" in (directory / "problem.py").read_text()


def test_extract_by_name_or_number_and_a_clear_miss(tmp_path: Path) -> None:
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.profiling.grouped import _pick

    labels = ["model.layers.{0..1} (Layer)", "model.layers.{0..1}.mlp (MLP)"]
    assert _pick(2, labels) == 2 and _pick("2", labels) == 2 and _pick("(MLP)", labels) == 2
    with pytest.raises(KernelpilotError, match="out of range; choose 1 to 2"):
        _pick(3, labels)
    with pytest.raises(KernelpilotError, match="no row matches --extract 'Attention'"):
        _pick("Attention", labels)


def test_compile_check_counts_inductor_kernels(traced) -> None:  # type: ignore[no-untyped-def]
    from kernelpilot.profiling.compile_check import check_chains
    from kernelpilot.profiling.extract_graph import chain_problem, problem_source
    from kernelpilot.profiling.fusion import find_chains

    trace, _ = traced
    chain = next(c for c in find_chains(trace, 2) if c.label() == "silu -> mul")
    check_chains([(chain, problem_source(chain_problem(trace, chain, script="s.py"), weights=False))], "cpu")
    assert chain.compiled.startswith(("yes: 1 kernel on CPU", "no: ")), chain.compiled
