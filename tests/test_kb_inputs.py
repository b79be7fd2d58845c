"""KernelBench's input sets drawn once per problem and seed (kernelpilot/evaluation/kernelbench/inputs.py, CPU): a
cached set is the very values and generator state a fresh draw gives, writes into a handed-out set never
reach the next one, and what changes the draw (seed, default dtype, the problem's sizes) misses."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelpilot.evaluation.kernelbench import harness as kb  # noqa: E402
from kernelpilot.evaluation.kernelbench.inputs import KernelBenchInputs  # noqa: E402
from kernelpilot.rules import get_rules  # noqa: E402


def _problem() -> types.ModuleType:
    m = types.ModuleType("kbprob")
    m.rows, m.cols = 4, 16

    def get_inputs():
        return [torch.rand(m.rows, m.cols), 3, torch.randn(m.cols)]

    m.get_inputs = get_inputs
    return m


def _draw(m: types.ModuleType):
    return lambda: list(m.get_inputs())


def test_a_cached_set_is_a_fresh_draw_with_the_generator_where_drawing_leaves_it() -> None:
    m = _problem()
    cache = KernelBenchInputs(m, "cpu")
    first = cache.get(7, torch.float32, True, _draw(m), kb._set_seed)
    after_first = torch.rand(5)
    second = cache.get(7, torch.float32, True, _draw(m), kb._set_seed)
    after_second = torch.rand(5)
    kb._set_seed(7)
    fresh = m.get_inputs()
    after_fresh = torch.rand(5)
    assert (cache.draws, cache.hits) == (1, 1)
    for a, b, c in zip(first, second, fresh):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, c) and torch.equal(b, c)
        else:
            assert a == b == c
    assert torch.equal(after_first, after_fresh) and torch.equal(after_second, after_fresh)


def test_writes_into_a_handed_out_set_never_reach_the_next() -> None:
    m = _problem()
    cache = KernelBenchInputs(m, "cpu")
    first = cache.get(1, torch.float32, True, _draw(m), kb._set_seed)
    keep = first[0].clone()
    first[0].fill_(123.0)  # a candidate that writes into its input
    second = cache.get(1, torch.float32, True, _draw(m), kb._set_seed)
    second[2].zero_()
    third = cache.get(1, torch.float32, True, _draw(m), kb._set_seed)
    assert torch.equal(second[0], keep) and torch.equal(third[0], keep)
    assert third[2].abs().sum() > 0
    assert first[0] is not second[0] and second[0] is not third[0]


def test_what_changes_the_draw_misses() -> None:
    m = _problem()
    cache = KernelBenchInputs(m, "cpu")
    cache.get(1, torch.float32, True, _draw(m), kb._set_seed)
    cache.get(2, torch.float32, True, _draw(m), kb._set_seed)  # another seed
    cache.get(1, torch.float16, True, _draw(m), kb._set_seed)  # another harness precision
    cache.get(1, torch.float32, False, _draw(m), kb._set_seed)  # v0.1 does not cast
    m.rows = 8  # a candidate that changes the problem's sizes
    got = cache.get(1, torch.float32, True, _draw(m), kb._set_seed)
    assert got[0].shape == (8, 16)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # a candidate that changes the default dtype
    try:
        got = cache.get(1, torch.float32, True, _draw(m), kb._set_seed)
    finally:
        torch.set_default_dtype(old)
    assert got[0].dtype == torch.float64
    assert (cache.draws, cache.hits) == (6, 0)


def test_sets_that_cannot_be_copied_faithfully_or_do_not_fit_are_drawn_every_time(monkeypatch) -> None:
    m = _problem()
    m.get_inputs = lambda: [torch.rand(4, 4).t(), [1, 2]]  # a transposed view and a mutable list
    cache = KernelBenchInputs(m, "cpu")
    for _ in range(2):
        cache.get(3, torch.float32, True, _draw(m), kb._set_seed)
    assert (cache.draws, cache.hits) == (2, 0) and not cache.sets
    monkeypatch.setenv("KERNELPILOT_KB_INPUT_CACHE_BYTES", "0")
    m2 = _problem()
    cache2 = KernelBenchInputs(m2, "cpu")
    for _ in range(2):
        cache2.get(3, torch.float32, True, _draw(m2), kb._set_seed)
    assert (cache2.draws, cache2.hits) == (2, 0)
    cache2.clear()
    assert cache2.host_bytes == 0


PROBLEM = """
import torch
import torch.nn as nn

DRAWS = []

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    DRAWS.append(1)
    return [torch.randn(16, 64)]

def get_init_inputs():
    return []
"""

CANDIDATE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        {body}
"""


def test_two_candidates_of_one_problem_share_kernelbench_draws_with_the_same_score(tmp_path: Path) -> None:
    """Through the worker: KernelBench's 5 trials and its timing inputs are drawn for the first candidate
    only; a second candidate, one that writes into its input, gets KernelBench's own verdict."""
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "p.py").write_text(PROBLEM)
    worker = Worker("cpu")
    verdicts = []
    for i, body in enumerate(("return torch.clamp(x, min=0)", "x.clamp_(min=0.5)\n        return x")):
        (tmp_path / f"c{i}.py").write_text(CANDIDATE.format(body=body))
        settings = EvalSettings(device="cpu", confine=False, rules="kernelbench", trials=2)
        msg = {"op": "evaluate", "problem": str(tmp_path / "p.py"), "candidate_model": str(tmp_path / f"c{i}.py"),
               "candidate_dir": str(tmp_path), "mode": "test", "settings": settings.to_dict(), "own_kernels": [],
               "kind": "pytorch"}
        verdicts.append(worker.evaluate(msg)["verdict"])
    state = next(iter(worker.problems.values()))
    harness = get_rules("kernelbench").harness
    assert state.kb_inputs.draws == harness.trials and state.kb_inputs.hits == harness.trials
    assert verdicts[0]["kernelbench"]["status"] == "correct"
    assert verdicts[1]["kernelbench"]["status"] == "incorrect"  # in place after the reference: clamp at 0.5


def test_kernelbench_draws_pause_the_watched_block(monkeypatch) -> None:
    """A draw on the host (10-20 s for level1/19) runs under the harness allowance with the block's deadline
    paused: on the H200 a first candidate of level1/19 timed out in KernelBench's harness (81.7 s allowance)."""
    from kernelpilot.evaluation.worker import watchdog

    sent: list[dict] = []
    dog = watchdog.Watchdog(sent.append, None)
    dog.begin(watchdog.Allowance(floor_s=1.0, first_call_s=0.0, harness_s=777.0))
    monkeypatch.setattr(watchdog, "_current", dog)
    m = _problem()
    seen: list[dict] = []
    inner = m.get_inputs
    m.get_inputs = lambda: (seen.append(dict(sent[-1])), inner())[1]

    class Same(torch.nn.Module):
        def forward(self, x, n, y):
            return x * n

    m.Model = Same
    m.get_init_inputs = lambda: []
    with watchdog.calls("kernelbench", "KernelBench's harness", n=4):
        out = kb.score(m, Same, get_rules("kernelbench").harness, "fp32", "cpu", False,
                       inputs_cache=KernelBenchInputs(m, "cpu"))
    assert out["status"] == "correct"
    assert seen and all(w["allow_s"] == 777.0 and "get_inputs" in w["call"] for w in seen)
    assert any(w["call"] == "KernelBench's harness" for w in sent[sent.index(seen[0]) + 1:])  # re-armed after


def test_the_copies_of_a_kept_set_are_harness_work_too(monkeypatch) -> None:
    """Keeping a drawn set (a copy to the host) and handing out a kept one (a copy back to the device) are the
    harness's work as much as the draw: on an H100 (2026-12-07) a 6 GiB set's copies ran on the candidate's call
    allowance in test mode, and five level1/19 verdicts timed out ("did not return within 1.0 s")."""
    from kernelpilot.evaluation.worker import watchdog

    sent: list[dict] = []
    dog = watchdog.Watchdog(sent.append, None)
    dog.begin(watchdog.Allowance(floor_s=1.0, first_call_s=0.0, harness_s=777.0))
    monkeypatch.setattr(watchdog, "_current", dog)
    m = _problem()

    class Same(torch.nn.Module):
        def forward(self, x, n, y):
            return x * n

    m.Model = Same
    m.get_init_inputs = lambda: []
    cache = KernelBenchInputs(m, "cpu")
    armed: list[dict] = []
    fetch = cache.get
    monkeypatch.setattr(cache, "get", lambda *a, **k: (armed.append(dict(sent[-1])), fetch(*a, **k))[1])
    with watchdog.calls("kernelbench", "KernelBench's harness", n=4):
        for _ in range(2):  # drawn and kept, then every set from the cache
            out = kb.score(m, Same, get_rules("kernelbench").harness, "fp32", "cpu", False, inputs_cache=cache)
            assert out["status"] == "correct"
    assert cache.hits == len(armed) // 2 > 0
    assert all(w["allow_s"] == 777.0 and "input set for seed" in w["call"] for w in armed), armed


def test_an_exception_kernelbench_does_not_catch_is_not_compiled(tmp_path: Path) -> None:
    """ModelNew(...) raising a TypeError escapes KernelBench's eval_kernel_against_ref (it catches RuntimeError
    there); its batch scorer records that as compiled=False (other_error): KernelBench's status compile_error.
    A RuntimeError there is its runtime_error."""
    from kernelpilot.evaluation import EvalSettings
    from kernelpilot.evaluation.worker.main import Worker

    (tmp_path / "p.py").write_text(PROBLEM)
    worker = Worker("cpu")
    got = []
    for i, err in enumerate(("TypeError('missing cpp_sources')", "RuntimeError('Error building extension')")):
        (tmp_path / f"c{i}.py").write_text(
            "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
            f"        super().__init__()\n        raise {err}\n\n    def forward(self, x):\n        return x\n")
        settings = EvalSettings(device="cpu", confine=False, rules="kernelbench", trials=2)
        msg = {"op": "evaluate", "problem": str(tmp_path / "p.py"), "candidate_model": str(tmp_path / f"c{i}.py"),
               "candidate_dir": str(tmp_path), "mode": "test", "settings": settings.to_dict(), "own_kernels": [],
               "kind": "pytorch"}
        got.append(worker.evaluate(msg)["verdict"].get("kernelbench") or {})
    assert got[0].get("status") == "compile_error" and got[0].get("compiled") is False, got[0]
    assert got[1].get("status") == "runtime_error", got[1]


def test_the_host_budget_is_shared_among_the_hosts_gpus(monkeypatch) -> None:
    """40% of the available host memory on a one-GPU host (level1/19's six 6 GiB sets on 128 GiB), a share of it
    per GPU on a larger one: each GPU's worker keeps its own sets."""
    from kernelpilot.evaluation.kernelbench import inputs as kb_inputs

    monkeypatch.setattr(kb_inputs, "_host_available", lambda: 100 << 30)
    monkeypatch.delenv(kb_inputs.ENV, raising=False)
    cache = kb_inputs.KernelBenchInputs(types.ModuleType("problem"), "cpu")
    monkeypatch.setattr(kb_inputs, "_gpus_on_host", lambda: 1)
    assert cache._budgets() == (0, 40 << 30)
    monkeypatch.setattr(kb_inputs, "_gpus_on_host", lambda: 8)
    assert cache._budgets() == (0, 5 << 30)
    cache.host_bytes = 20 << 30  # what the cache holds counts as available to it
    assert cache._budgets() == (0, 6 << 30)
    monkeypatch.setenv(kb_inputs.ENV, str(1 << 30))
    assert cache._budgets() == (0, 1 << 30)
