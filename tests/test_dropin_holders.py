"""Chains swapped through the module holding them, on the patterns of real decoder layers: a constant made
from Python data inside the forward (``torch.tensor([...])``), an object argument (a KV cache) that a
recorded forward cannot update, one chain held by modules of two classes, intermediates autograd only saves
(never outputs of the problem), and which passing swaps `kernelpilot apply` can combine."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

BLOCKS = '''"""Residual blocks whose norm scales by a constant tensor made in the forward, with an optional cache."""
import sys

import torch
import torch.nn as nn


class Cache:
    pass


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.weight = nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x, cache=None):
        s = x + self.lin(x)
        scale = torch.tensor([2.0])
        y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5) * scale
        return self.weight * y + s


class Tail(Block):
    """The same computation in a module of another class."""


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.proj = nn.Linear(8, 8)
        self.tail = Tail()

    def forward(self, x, cache=None):
        h = x
        for block in self.blocks:
            h = block(h, cache=cache)
        return self.tail(self.proj(h), cache=cache)


def main():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cache = Cache() if "--cache" in sys.argv else None
    for _ in range(4):
        loss = model(torch.randn(3, 8), cache=cache).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''

CHAIN = "model.blocks.0: add -> pow -> mean -> add -> rsqrt -> mul -> mul -> mul -> add"


def extract(tmp_path: Path, argv: list[str], text: str = CHAIN) -> tuple[Path, dict]:
    from kernelpilot.profiling.grouped import grouped_command

    script = tmp_path / "blocks.py"
    script.write_text(BLOCKS)
    out = tmp_path / "problems"
    args = SimpleNamespace(script=str(script), script_args=argv, steps=3, top=20, extract=text, out=str(out),
                           group="fusion", depth=3, weights=False, compile_check=False)
    assert grouped_command(args) == 0  # write_extracted loads and runs the problem
    (problem,) = [d for d in out.iterdir() if d.is_dir()]
    return problem, json.loads((problem / "origin.json").read_text())


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_holder_making_a_constant_is_replayed_with_it(tmp_path: Path) -> None:
    import torch

    from kernelpilot.dropin.swap import _as_tuple

    problem, origin = extract(tmp_path, [])
    assert "holder_error" not in origin, origin.get("holder_error")
    holder_src = (problem / "holder.py").read_text()
    assert "torch.tensor([2.0], dtype=torch.float32, device=" in holder_src
    # swapped only where the holder is of the recorded class (the Tail's equal chain is named, not swapped)
    assert origin["paths"] == ["blocks.0", "blocks.1"] and origin["class"] == "Block"
    assert origin["other_holders"] == ["tail (Tail)"]
    # the problem returns the result and what later calls read, never what autograd alone saves
    prob = _module(problem / "problem.py", "kp_prob_blocks")
    model = prob.Model()
    outs = model(*prob.get_inputs())
    assert isinstance(outs, torch.Tensor) or len(outs) == 1
    # the recorded forward with the reference chain as the kernel computes what the module computes
    blocks = _module(tmp_path / "blocks.py", "kp_blocks")
    torch.manual_seed(1)
    block = blocks.Block()
    x = torch.randn(3, 8)
    # the Block's Linear is called as a module in the replay, not inlined (a swap into it would run)
    assert origin["holder"]["modules"] == {"m_lin": "lin"} and "P.m_lin(x0)" in holder_src
    params = SimpleNamespace(**{a: block.get_parameter(n) for a, n in origin["holder"]["params"].items()},
                             **{a: block.get_submodule(n) for a, n in origin["holder"]["modules"].items()})
    chain = prob.Model()
    chain.load_state_dict({k: block.get_parameter(v) for k, v in origin["params"].items()})
    replay = _module(problem / "holder.py", "kp_holder_blocks").forward
    got = replay(params, lambda *t: _as_tuple(chain(*t[: len(t) - len(origin["params"])])), x)
    torch.testing.assert_close(got, block(x))


def test_a_holder_called_with_an_object_is_not_swapped_and_says_why(tmp_path: Path) -> None:
    from kernelpilot.dropin.swap import install

    problem, origin = extract(tmp_path, ["--cache"])
    assert "holder" not in origin
    assert "is called with cache=<Cache>" in origin["holder_error"]
    with pytest.raises(ValueError, match="cache=<Cache>"):
        install(object(), None, origin, [], problem)


def test_a_module_called_with_a_kv_cache_is_refused_with_the_fix(tmp_path: Path) -> None:
    from kernelpilot.dropin.swap import install
    from kernelpilot.profiling.extract_graph import _objects_hint
    from kernelpilot.profiling.records import ModuleCall

    origin = {"kind": "module", "path": "layers.0", "objects": {"past_key_values": "DynamicCache"}}
    with pytest.raises(ValueError, match="past_key_values=<DynamicCache>"):
        install(object(), None, origin, [], tmp_path)
    call = ModuleCall("layers.0", "LlamaDecoderLayer", 0, 0, 0)
    call.objects["past_key_values"] = "DynamicCache"
    assert "use_cache=False" in _objects_hint(call)


def test_apply_combines_only_swaps_of_disjoint_modules(tmp_path: Path) -> None:
    from kernelpilot.dropin.apply_run import RunResult
    from kernelpilot.dropin.apply_swaps import disjoint, overlap

    def module(*paths: str) -> tuple[list[str], set[str], list[str]]:
        return list(paths), set(), list(paths)

    assert overlap(module("layers.0"), module("layers.0.mlp")) and overlap(module("layers.1.mlp"), module("layers.1"))
    assert overlap(module(""), module("norm")) and not overlap(module("layers.1"), module("layers.10"))
    # a chain replayed in layers.0 that calls its mlp and inlines its post-attention norm
    chain = (["layers.0"], {"layers.0"}, ["layers.0.post_attention_layernorm"])
    assert not overlap(chain, module("layers.0.mlp")) and not overlap(chain, module("layers.0.input_layernorm"))
    assert overlap(chain, module("layers.0.post_attention_layernorm")) and overlap(chain, module("layers.0"))
    assert overlap(chain, module(""))
    dropins = {}
    for name, paths, ms in (("norm", ["layers.0.norm", "layers.1.norm", "norm"], 9.0),
                            ("layer_chain", ["layers.0", "layers.1"], 8.0), ("head", ["head"], 9.5)):
        d = tmp_path / name / "candidate" / "dropin.py"
        d.parent.mkdir(parents=True)
        (d.parent.parent / "origin.json").write_text(json.dumps({"paths": paths}))
        dropins[name] = (d, RunResult(step_ms=[ms] * 8))
    passed = [d for d, _ in dropins.values()]
    together, apart = disjoint(passed, {d: r for d, r in dropins.values()}, 10.0)
    # the layer chain gained most; the norms inside the layers cannot run with it; the head can
    assert together == [dropins["layer_chain"][0], dropins["head"][0]]
    assert apart == [(dropins["norm"][0], dropins["layer_chain"][0])]
    # two smaller swaps inside the layers that gain more together than the layer chain alone are kept instead
    mlp = tmp_path / "mlp" / "candidate" / "dropin.py"
    mlp.parent.mkdir(parents=True)
    (mlp.parent.parent / "origin.json").write_text(json.dumps({"paths": ["layers.0.mlp", "layers.1.mlp"]}))
    results = {d: r for d, r in dropins.values()} | {mlp: RunResult(step_ms=[8.5] * 8)}
    together, apart = disjoint([*passed, mlp], results, 10.0)  # gains: norm 1.0 + mlp 1.5 + head 0.5 > chain 2.0 + head
    assert together == [dropins["norm"][0], dropins["head"][0], mlp]
    assert apart == [(dropins["layer_chain"][0], mlp)]  # named by the most gaining swap it overlaps
    # a passing swap that overlaps nothing but made the step slower is left out, with no swap to name (a tiny CPU
    # model of apply_gpu.py --small: `kernelpilot apply` stopped on a StopIteration here)
    slow = tmp_path / "slow" / "candidate" / "dropin.py"
    slow.parent.mkdir(parents=True)
    (slow.parent.parent / "origin.json").write_text(json.dumps({"paths": ["embed"]}))
    results[slow] = RunResult(step_ms=[10.5] * 8)
    together, apart = disjoint([*passed, mlp, slow], results, 10.0)
    assert together == [dropins["norm"][0], dropins["head"][0], mlp]
    assert apart == [(dropins["layer_chain"][0], mlp), (slow, None)]


def test_write_installs_the_swaps_measured_together(tmp_path: Path) -> None:
    """--write installs the set that was run together (the H200 run of 2026-12-05 wrote all three approved
    drop-ins, two of which cannot run together), less a swap that made the step slower beyond the spread,
    and only the most gaining one when the set failed together."""
    from kernelpilot.dropin.apply_run import RunResult
    from kernelpilot.dropin.apply_swaps import to_write

    made = {}
    for name, steps in (("norm", [8.0, 8.1, 7.9] * 4), ("mlp", [9.0, 9.1, 8.9] * 4), ("head", [11.0, 11.1, 10.9] * 4),
                        ("noisy", [9.5, 12.0, 9.0] * 4)):
        d = tmp_path / name / "candidate" / "dropin.py"
        d.parent.mkdir(parents=True)
        (d.parent.parent / "origin.json").write_text(json.dumps({"paths": [name]}))
        made[name] = (d, RunResult(step_ms=steps))
    results = {d: r for d, r in made.values()}
    norm, mlp, head, noisy = (made[n][0] for n in ("norm", "mlp", "head", "noisy"))
    assert to_write([norm, mlp], results, "ok", 10.0, 0.2) == ([norm, mlp], [])
    chosen, notes = to_write([norm, mlp, head], results, "ok", 10.0, 0.2)  # head: +1 ms, spread 0.2
    assert chosen == [norm, mlp] and len(notes) == 1 and "slower (+1.000 ms)" in notes[0]
    assert to_write([noisy], results, None, 10.0, 0.2)[0] == [noisy]  # slower, but within its own spread
    chosen, notes = to_write([norm, mlp], results, "outputs differ", 10.0, 0.2)
    assert chosen == [norm] and "outputs differ" in notes[0]
    # under torch.compile the table says why nothing gained when no passing swap is beyond the spread
    from kernelpilot.dropin.apply_swaps import any_faster

    assert any_faster([(results[norm], "ok")], 10.0, 0.2)
    assert not any_faster([(results[norm], "outputs differ"), (results[noisy], "ok"), (results[head], "ok")], 10.0, 0.2)


OWN_BACKWARD_ADD = '''import torch
import torch.nn as nn


def chain(a, b, scale, w):
    s = a + b
    return w * (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5) * scale) + s


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.@@W@@ = nn.Parameter(torch.ones(8))

    def forward(self, x0, x1, x2):
        return chain(x0, x1, x2, self.@@W@@)

    def backward(self, grads, x0, x1, x2):
        dy, w, scale = grads[0], self.@@W@@, x2
        s = x0 + x1
        r = torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5)
        n = s * r
        dn = dy * w * scale
        ds = dn * r - s * r.pow(3) * (dn * s).mean(-1, keepdim=True) + dy
        dw = (dy * n * scale).reshape(-1, n.shape[-1]).sum(0)
        dscale = (dy * w * n).sum().reshape(scale.shape)
        return (ds, ds, dscale), {"@@W@@": dw}  # one tensor for both addends, as an add's backward gives
'''


def test_a_backward_giving_one_tensor_to_two_inputs_passes_the_check(tmp_path: Path) -> None:
    from kernelpilot.dropin.registration import write_registration

    problem, origin = extract(tmp_path, [])
    (attr,) = origin["params"]
    (problem / "candidate").mkdir()
    (problem / "candidate" / "model_new.py").write_text(OWN_BACKWARD_ADD.replace("@@W@@", attr))
    reg = write_registration(problem / "candidate", candidate_id="c1")
    assert reg.training, reg.gradient


def test_each_run_that_swaps_other_modules_compiles_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernelpilot.dropin import apply_run

    resets: list[int] = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    monkeypatch.setattr(apply_run, "_LAST_RUN", [])
    base = ((), True, (), False, True)
    swapped = (("problems/1/candidate/dropin.py",), True, (), False, True)
    for config, expected in ((base, 0), (base, 0), (swapped, 1), (swapped, 1), (base, 2)):
        apply_run._fresh_compile(config)
        assert len(resets) == expected  # the baseline twice: its compiled code is kept; a change: compiled again


def test_a_child_is_called_with_its_recorded_arguments_or_inlined() -> None:
    from kernelpilot.profiling import holder_calls
    from kernelpilot.profiling.program import Program
    from kernelpilot.profiling.records import ModuleCall, TensorArg, TensorRef
    from kernelpilot.profiling.trace import Trace

    prog = Program(Trace(), [], [], [])
    prog.names.update({1: "v1", 2: "x1", 3: "x2"})
    ref = lambda vid: TensorRef(vid, TensorArg((2, 8), "torch.float32"), 64)  # noqa: E731
    attn = ModuleCall("layers.0.self_attn", "Attention", 0, 0, 0)
    attn.inputs = [("hidden_states", ref(1)), ("position_embeddings.0", ref(2)), ("position_embeddings.1", ref(3))]
    attn.literals = {"attention_mask": None, "use_cache": False}
    assert holder_calls.arguments(prog, "P", attn) == ("hidden_states=v1, position_embeddings=(x1, x2), "
                                                       "attention_mask=None, use_cache=False")
    lost = ModuleCall("layers.0.mlp", "MLP", 0, 0, 0)
    lost.inputs = [("0", ref(9))]  # a value the replay never named (made by a global): the child is inlined
    with pytest.raises(holder_calls.Unnamed) as exc:
        holder_calls.arguments(prog, "P", lost)
    assert exc.value.path == "layers.0.mlp"
    gap = ModuleCall("layers.0.mlp", "MLP", 0, 0, 0)
    gap.inputs = [("1", ref(1))]  # positional 0 missing (a default left out): not written back
    with pytest.raises(holder_calls.Unnamed):
        holder_calls.arguments(prog, "P", gap)
