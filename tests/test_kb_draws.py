"""KernelBench's input sets of several seeds drawn side by side in forked children (kb_draws.py, through
KernelBenchInputs.prefetch, CPU): the very values and CPU generator state a serial draw gives; what a child
cannot send as it is (a non-contiguous tensor, an error in get_inputs) is drawn serially, as before."""

from __future__ import annotations

import os
import types

import pytest

torch = pytest.importorskip("torch")

from kernelpilot.evaluation.kernelbench import draws as kb_draws  # noqa: E402
from kernelpilot.evaluation.kernelbench import harness as kb  # noqa: E402
from kernelpilot.evaluation.kernelbench.inputs import PARALLEL_ENV, KernelBenchInputs  # noqa: E402

SEEDS = [11, 2**31 + 5, 33, 11]  # a repeated seed is drawn once


def _problem(extra=None) -> types.ModuleType:
    m = types.ModuleType("kbprob")
    m.rows, m.cols = 64, 1000

    def get_inputs():
        items = [torch.rand(m.rows, m.cols), 3, torch.randn(m.cols), torch.randint(0, 5, (7,)), "sum",
                 torch.rand(0), torch.randn(4, 4).to(torch.bfloat16), torch.rand(3) > 0.5]
        return items + (extra() if extra else [])

    m.get_inputs = get_inputs
    return m


def _serial(m: types.ModuleType, seed: int) -> tuple[list, torch.Tensor]:
    kb._set_seed(seed)
    items = list(m.get_inputs())
    return items, torch.rand(5)  # where the generator stood after the draw


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y))
        or (not isinstance(x, torch.Tensor) and x == y) for x, y in zip(a, b))


def test_side_by_side_draws_are_the_serial_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PARALLEL_ENV, "1")  # any size: these sets are small
    m = _problem()
    cache = KernelBenchInputs(m, "cpu")
    assert cache.prefetch(SEEDS, torch.float32, True, m.get_inputs, lambda x: x, kb._set_seed) == 3
    for seed in SEEDS:
        got = cache.get(seed, torch.float32, True, lambda: list(m.get_inputs()), kb._set_seed)
        after = torch.rand(5)
        want, want_after = _serial(m, seed)
        assert _same(got, want), seed
        assert torch.equal(after, want_after), seed  # the CPU generator where a serial draw leaves it
    assert (cache.draws, cache.parallel_draws, cache.hits) == (3, 3, 4)
    assert cache.prefetch(SEEDS, torch.float32, True, m.get_inputs, lambda x: x, kb._set_seed) == 0  # all kept already


def test_sets_drawn_side_by_side_that_the_cache_cannot_keep_serve_their_one_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for one set: the others drawn side by side are held for their one use, not dropped and drawn again
    one after the other (the H200's level1/19: 20 s of every verdict)."""
    from kernelpilot.evaluation.kernelbench.inputs import ENV

    monkeypatch.setenv(PARALLEL_ENV, "1")
    m = _problem()
    size = kb_draws.size_hint(m.get_inputs)
    assert size
    monkeypatch.setenv(ENV, str(size + 1))  # the cache keeps one set
    cache = KernelBenchInputs(m, "cpu")
    seeds = [11, 22, 33]
    assert cache.prefetch(seeds, torch.float32, True, m.get_inputs, lambda x: x, kb._set_seed) == 3
    assert (cache.kept, cache.one_use) == (1, 2)
    for seed in seeds:
        got = cache.get(seed, torch.float32, True, lambda: pytest.fail("drawn again"), kb._set_seed)
        after = torch.rand(5)
        want, want_after = _serial(m, seed)
        assert _same(got, want), seed
        assert torch.equal(after, want_after), seed
        got[0].zero_()  # a candidate writing into its inputs
    assert (cache.kept, cache.one_use) == (1, 0) and cache.draws == 3  # each held set served once
    first = cache.get(11, torch.float32, True, lambda: pytest.fail("drawn again"), kb._set_seed)
    assert _same(first, _serial(m, 11)[0])  # kept as the child wrote it, handed out afresh: the write never reached it
    again = cache.get(22, torch.float32, True, lambda: list(m.get_inputs()), kb._set_seed)
    assert _same(again, _serial(m, 22)[0]) and cache.draws == 4  # a one-use set's second use draws it again


def test_what_a_child_cannot_send_is_drawn_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PARALLEL_ENV, "1")
    parent = os.getpid()
    m = _problem(extra=lambda: [torch.rand(6, 5).t()])  # not contiguous: not sent
    assert kb_draws.draw([1, 2], m.get_inputs, kb._set_seed, parallel=2, size=1 << 20) == {}
    cache = KernelBenchInputs(m, "cpu")
    assert cache.prefetch([1, 2], torch.float32, True, m.get_inputs, lambda x: x, kb._set_seed) == 0
    got = cache.get(1, torch.float32, True, lambda: list(m.get_inputs()), kb._set_seed)
    assert _same(got, _serial(m, 1)[0]) and cache.draws == 1

    def fails_in_a_child():
        if os.getpid() != parent:
            raise RuntimeError("Cannot re-initialize CUDA in forked subprocess")  # what CUDA in get_inputs does
        return []

    m2 = _problem(extra=fails_in_a_child)
    assert kb_draws.draw([1, 2, 3], m2.get_inputs, kb._set_seed, parallel=2, size=1 << 20) == {}
    cache2 = KernelBenchInputs(m2, "cpu")
    assert cache2.prefetch([1, 2], torch.float32, True, m2.get_inputs, lambda x: x, kb._set_seed) == 0
    assert _same(cache2.get(2, torch.float32, True, lambda: list(m2.get_inputs()), kb._set_seed), _serial(m2, 2)[0])


def test_small_sets_and_an_unsizable_get_inputs_draw_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARALLEL_ENV, raising=False)
    m = _problem()  # 260 kB a set: under the threshold
    assert KernelBenchInputs(m, "cpu").prefetch([1, 2], torch.float32, True, m.get_inputs, lambda x: x,
                                                kb._set_seed) == 0
    monkeypatch.setenv(PARALLEL_ENV, "1")
    m.get_inputs = lambda: [torch.rand(4).numpy().sum()]  # the meta device cannot run it: no size, no fork
    assert kb_draws.size_hint(m.get_inputs) is None
    assert KernelBenchInputs(m, "cpu").prefetch([1, 2], torch.float32, True, m.get_inputs, lambda x: x,
                                                kb._set_seed) == 0
    monkeypatch.setenv(PARALLEL_ENV, "0")  # off
    m3 = _problem()
    assert KernelBenchInputs(m3, "cpu").prefetch([1, 2], torch.float32, True, m3.get_inputs, lambda x: x,
                                                 kb._set_seed) == 0


def test_kernelbench_score_draws_its_sets_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through KernelBench's harness (CPU): the trial sets are drawn side by side before the first trial, every
    trial then a hit, the score as before, and the verdict's notes say so."""
    from kernelpilot.rules import get_rules

    monkeypatch.setenv(PARALLEL_ENV, "1")
    m = _problem()

    class Ref(torch.nn.Module):
        def forward(self, x, n, y, *rest):
            return x * n + y

    m.Model = Ref
    m.get_init_inputs = lambda: []
    cache = KernelBenchInputs(m, "cpu")
    harness = get_rules("kernelbench").harness
    out = kb.score(m, Ref, harness, "fp32", "cpu", False, inputs_cache=cache)
    assert out["status"] == "correct", out
    assert cache.parallel_draws == harness.trials and cache.hits == harness.trials, (cache.parallel_draws, cache.hits)
    assert any("side by side" in n for n in out["notes"]), out["notes"]


def test_kernelbench_score_with_room_for_two_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for two of the five trial sets: two kept, three used once; the next candidate gets the two kept ones
    and draws the other three side by side again, never one after the other."""
    from kernelpilot.evaluation.kernelbench.inputs import ENV
    from kernelpilot.rules import get_rules

    monkeypatch.setenv(PARALLEL_ENV, "1")
    m = _problem()

    class Ref(torch.nn.Module):
        def forward(self, x, n, y, *rest):
            return x * n + y

    m.Model = Ref
    m.get_init_inputs = lambda: []
    size = kb_draws.size_hint(m.get_inputs)
    assert size
    monkeypatch.setenv(ENV, str(2 * size + 1))
    cache = KernelBenchInputs(m, "cpu")
    harness = get_rules("kernelbench").harness
    for _candidate in range(2):
        out = kb.score(m, Ref, harness, "fp32", "cpu", False, inputs_cache=cache)
        assert out["status"] == "correct", out
        assert (cache.kept, cache.one_use) == (2, 0)
    assert cache.draws == cache.parallel_draws == harness.trials + harness.trials - 2
    assert cache.hits == 2 * harness.trials


def test_a_stuck_child_is_given_up_with_the_rest() -> None:
    """A child that never answers (a lock copied held by the fork, say) costs one timeout, not one per seed:
    it and every other child are killed and their seeds left to the serial draw."""
    import time

    parent = os.getpid()

    def stuck():
        if os.getpid() != parent:
            time.sleep(60)
        return [torch.rand(3)]

    started = time.monotonic()
    assert kb_draws.draw([1, 2, 3, 4], stuck, kb._set_seed, parallel=2, size=1 << 20, timeout_s=1.0) == {}
    assert time.monotonic() - started < 10


def test_a_stuck_child_is_given_up_inside_the_harness_allowance() -> None:
    """The block that draws side by side runs under the harness's allowance: giving up on a stuck child (then
    drawing serially, each set under an allowance of its own) must leave room for the sets it did receive."""
    from kernelpilot.evaluation.kernelbench.inputs import child_timeout_s
    from kernelpilot.evaluation.worker.watchdog import Allowance

    gb = 2**30
    assert child_timeout_s(1 * gb) < child_timeout_s(6 * gb) <= child_timeout_s(64 * gb)
    assert child_timeout_s(6 * gb) >= 60 + 6 * 2.5 * 3  # three times a serial draw at its slowest, and more
    assert child_timeout_s(64 * gb) <= 0.6 * Allowance().harness_s
