"""Drop-ins on real model code: a candidate's own backward (used, checked against float64 on both the
operator and the eager path), tensors nested in a module's arguments (a decoder layer's
``position_embeddings=(cos, sin)``), the one-ulp perturbation behind `kernelpilot apply`'s bound, and a chain
whose holder cannot be replayed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from test_dropin import SCRIPT, extract_mlp, load, with_candidate

ROTARY = '''"""A model whose submodule takes tensors inside a tuple keyword argument."""
import torch
import torch.nn as nn


class Rotary(nn.Module):
    def forward(self, x, position_embeddings=None, scale=1.0):
        cos, sin = position_embeddings
        return (x * cos + x.flip(-1) * sin) * scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.rot = Rotary()

    def forward(self, x):
        angles = torch.arange(8.0)
        return self.rot(self.lin(x), position_embeddings=(angles.cos(), angles.sin()), scale=2.0)


def main():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        loss = model(torch.randn(2, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''


@pytest.fixture(scope="module")
def mlp_problem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_mlp(tmp_path_factory.mktemp("problems"))


def own_backward_candidate(problem: Path, tmp: Path, dx_scale: str) -> Path:
    return with_candidate(problem, tmp, dx_scale, source="mlp_own_backward.py", knob="DX_SCALE")


def test_the_candidates_own_backward_is_used_and_checked(mlp_problem: Path, tmp_path: Path) -> None:
    import torch

    from kernelpilot.dropin.registration import write_registration

    directory = own_backward_candidate(mlp_problem, tmp_path, "1.0")
    reg = write_registration(directory / "candidate", candidate_id="c1")
    assert reg.training and "(operator and eager path)" in reg.gradient, reg.gradient
    text = (directory / "candidate" / "dropin.py").read_text()
    assert "OWN_BACKWARD = True" in text and "the candidate's own (ModelNew.backward" in text
    dropin = load(directory / "candidate" / "dropin.py")
    calls = dropin._candidate_module.BACKWARD_CALLS  # type: ignore[attr-defined]
    torch.manual_seed(0)
    x = torch.randn(2, 7, 32, requires_grad=True)
    params = [(0.1 * torch.randn(s)).requires_grad_() for s in ((64, 32), (64, 32), (32, 64))]
    reference = load(directory / "problem.py").Model()  # type: ignore[attr-defined]
    ref_params = dict(zip(dropin.PARAMS, params))  # type: ignore[attr-defined]
    expected = torch.autograd.grad(torch.func.functional_call(reference, ref_params, (x,)).sum(), [x, *params])
    for path in (dropin.op, dropin.call):  # type: ignore[attr-defined]
        before = len(calls)
        got = torch.autograd.grad(path(x, *params).sum(), [x, *params])
        assert len(calls) == before + 1  # the candidate's backward ran, not the reference's vjp
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


def test_a_wrong_own_backward_fails_the_check(mlp_problem: Path, tmp_path: Path) -> None:
    from kernelpilot.dropin.registration import write_registration

    directory = own_backward_candidate(mlp_problem, tmp_path, "1.01")
    reg = write_registration(directory / "candidate", candidate_id="c2")
    assert not reg.training
    assert "input 0" in reg.gradient and "eager path: input 0" in reg.gradient and "parameter" not in reg.gradient


def test_tensors_inside_a_tuple_argument_are_inputs_of_the_extracted_module(tmp_path: Path) -> None:
    import torch

    from kernelpilot.dropin.swap import _tensor_args
    from kernelpilot.profiling.grouped import grouped_command

    script = tmp_path / "rotary.py"
    script.write_text(ROTARY)
    args = SimpleNamespace(script=str(script), script_args=[], steps=3, top=10, extract="(Rotary)",
                           out=str(tmp_path / "problems"), group="module", depth=3, weights=False, compile_check=False)
    assert grouped_command(args) == 0  # write_extracted loads and runs the problem
    (problem,) = [d for d in (tmp_path / "problems").iterdir() if d.is_dir()]
    origin = json.loads((problem / "origin.json").read_text())
    assert origin["arguments"] == ["0", "position_embeddings.0", "position_embeddings.1"]
    assert origin["literals"] == {"scale": 2.0} and not origin.get("externals")
    x, cos, sin = torch.randn(2, 8), torch.randn(8), torch.randn(8)
    assert _tensor_args((x,), {"position_embeddings": (cos, sin), "scale": 2.0}, origin) == [x, cos, sin]
    assert _tensor_args((x,), {"position_embeddings": (cos, sin), "scale": 3.0}, origin) is None  # another literal
    assert _tensor_args((x,), {"position_embeddings": (cos,), "scale": 2.0}, origin) is None  # a missing item


def test_perturbed_moves_each_element_by_at_most_one_ulp() -> None:
    import torch

    from kernelpilot.dropin.apply_run import perturbed

    torch.manual_seed(0)
    x = torch.randn(20000).to(torch.bfloat16)
    ids = torch.arange(5)
    rng = torch.get_rng_state()
    y, same_ids = perturbed((x, ids), {})
    assert torch.equal(torch.get_rng_state(), rng)  # the script's own random draws are left alone
    assert same_ids is ids and y.dtype == torch.bfloat16
    eps = torch.finfo(torch.bfloat16).eps
    step = (y.float() - x.float()).abs()
    assert bool((step <= eps * x.float().abs() * 1.0001).all())
    assert 0.5 < float((step > 0).float().mean()) < 0.8  # about two thirds move
    y2, _ = perturbed((x, ids), {})
    assert torch.equal(y2, y)  # seeded alike, two runs perturb alike


def test_a_gradient_is_moved_by_at_most_one_ulp_in_the_same_pattern_each_time() -> None:
    import torch

    from kernelpilot.dropin.apply_perturb import moved

    torch.manual_seed(0)
    g = torch.randn(30000).to(torch.bfloat16)
    g[:10] = 0
    rng = torch.get_rng_state()
    m = moved(g)
    assert torch.equal(torch.get_rng_state(), rng) and m.dtype == torch.bfloat16
    step = (m.float() - g.float()).abs()
    assert bool((step <= torch.finfo(torch.bfloat16).eps * g.float().abs() * 1.0001).all())
    up, down = float((m.float() > g.float()).float().mean()), float((m.float() < g.float()).float().mean())
    assert 0.28 < up < 0.39 and 0.28 < down < 0.39  # a third up, a third down, a third left
    assert torch.equal(moved(g), m) and bool((m[:10] == 0).all())  # the same pattern; zeros stay
    assert moved(torch.arange(4)).equal(torch.arange(4))  # integers have no gradient to move


def test_the_ulp_from_the_exponent_bits_is_frexps_for_every_dtype() -> None:
    import torch

    from kernelpilot.dropin.apply_perturb import _ulp

    torch.manual_seed(0)
    x = torch.randn(5000) * torch.logspace(-30, 30, 5000)
    x[:3] = torch.tensor([0.0, -0.0, 1.0])
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        wide = x.to(dtype).double() if dtype == torch.float64 else x.to(dtype).float()
        mantissa, exponent = torch.frexp(wide)  # the definition: wide = m * 2**e, |m| in [0.5, 1)
        expected = torch.where(wide == 0, torch.zeros_like(wide),
                               torch.ldexp(torch.full_like(wide, torch.finfo(dtype).eps / 2), exponent))
        finite = torch.isfinite(wide)  # float16 overflows: an infinity has nothing to move either way
        assert torch.equal(_ulp(wide, dtype)[finite], expected[finite]), dtype
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 1e-40])  # 1e-40: a float32 subnormal
    assert torch.equal(_ulp(special, torch.bfloat16), torch.zeros(4))  # nothing to move, and no NaN made


def test_outputs_and_gradients_are_moved_inside_a_compiled_forward_without_a_graph_break(tmp_path: Path) -> None:
    """The per-module sensitivity run: hooks on modules inside the compiled forward are traced (on an H100 the
    per-module run failed in Inductor's compilation, 2026-12-07); fullgraph=True raises at a graph break."""
    import json

    import torch

    from kernelpilot.dropin import apply_perturb
    from kernelpilot.dropin.apply_perturb import gradient_hooks, perturbed

    torch.manual_seed(0)
    apply_perturb._GRAD_MOVED = None  # as in a fresh process
    inner = torch.nn.Linear(64, 64)
    outer = torch.nn.Sequential(inner, torch.nn.Tanh())
    (tmp_path / "origin.json").write_text(json.dumps({"kind": "module", "path": "0", "params": {}}))
    (tmp_path / "candidate").mkdir()
    assert len(gradient_hooks(outer, tmp_path / "candidate" / "dropin.py")) == 1
    inner.register_forward_hook(lambda m, i, o: perturbed(o, {}))
    x = torch.randn(32, 64, requires_grad=True)
    plain = torch.tanh(torch.nn.functional.linear(x, inner.weight, inner.bias))
    got = torch.compile(outer, fullgraph=True)(x)
    got.sum().backward()
    moved = (got - plain).detach().abs()
    assert 0 < float((moved > 0).float().mean()) and float(moved.max()) < 1e-5  # one ulp of the linear's output
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_a_chain_whose_holder_cannot_be_replayed_is_refused_with_the_reason(tmp_path: Path) -> None:
    from kernelpilot.dropin.swap import install

    reason = ("model.layers.0 reads tensors that are neither its arguments nor its parameters; the chain cannot be "
              "swapped into it.")
    origin = {"kind": "chain", "path": "layers.0", "holder_error": reason}
    with pytest.raises(ValueError, match="neither its arguments nor its parameters"):
        install(object(), None, origin, [], tmp_path)


GLOBAL_TENSOR = '''"""A module whose forward reads a module-level tensor (neither an argument nor a parameter)."""
import torch
import torch.nn as nn

OFFSET = torch.linspace(0, 1, 8)


class Shift(nn.Module):
    def forward(self, x):
        return (x * OFFSET).exp() + 1.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.shift = Shift()

    def forward(self, x):
        return self.shift(self.lin(x))


def main():
    torch.manual_seed(0)
    model = Net()
    for _ in range(4):
        model(torch.randn(2, 8)).sum().backward()


if __name__ == "__main__":
    main()
'''


def test_a_chain_its_holder_cannot_replay_is_shown_and_extracted_with_a_note(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.profiling.grouped import grouped_command

    script = tmp_path / "shift.py"
    script.write_text(GLOBAL_TENSOR)
    args = SimpleNamespace(script=str(script), script_args=[], steps=3, top=10, extract="model.shift:",
                           out=str(tmp_path / "problems"), group="fusion", depth=3, weights=False, compile_check=False)
    assert grouped_command(args) == 0  # the table and the problem, not an error for the whole command
    out = capsys.readouterr().out
    assert "model.shift" in out and "cannot swap an approved kernel of it" in out
    (problem,) = [d for d in (tmp_path / "problems").iterdir() if d.is_dir()]
    origin = json.loads((problem / "origin.json").read_text())
    assert "holder" not in origin and "cannot be swapped into it" in origin["holder_error"]


def test_the_profiler_times_each_traced_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiler's ranges (op_timer, the default on a GPU) time the same calls the trace records, none
    of its own counted as the model's; on the CPU they time host ranges."""
    from kernelpilot.profiling.trace import record_script

    monkeypatch.setenv("KERNELPILOT_OP_TIMER", "host")
    host, _ = record_script(SCRIPT, [], 2)
    monkeypatch.setenv("KERNELPILOT_OP_TIMER", "profiler")
    prof, _ = record_script(SCRIPT, [], 2)
    assert prof.timing == "profiler" and host.timing == "host"
    assert [o.name for o in prof.ops] == [o.name for o in host.ops]  # no profiler op among the model's
    assert not any(o.name.startswith("profiler::") for o in prof.ops)
    timed = [o for o in prof.ops if o.ms > 0]
    assert len(timed) > 0.9 * len(prof.ops)


def test_gradients_of_one_shape_are_moved_unalike() -> None:
    """Two layers' gradients of one shape get different patterns (by index alone they moved alike: a band made of
    correlated moves), and each still moves a third up and a third down."""
    import torch

    from kernelpilot.dropin.apply_perturb import moved

    torch.manual_seed(1)
    a, b = torch.randn(30000), torch.randn(30000)
    up_a, up_b = moved(a) > a, moved(b) > b
    assert 0.28 < float(up_a.float().mean()) < 0.39 and 0.28 < float(up_b.float().mean()) < 0.39
    assert 0.2 < float((up_a & up_b).float().mean()) / float(up_a.float().mean()) < 0.5  # about independent
