"""Reference outputs kept per input seed between edits (reference_cache.py), on a real CPU worker:
reused on the second evaluation with the same verdict, invalidated by the problem's bytes and the
settings, still catching wrong and input-mutating candidates, bounded in memory, and never kept for a
reference that is not reproducible."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return torch.softmax(x, dim=-1) * 2.0 + y{extra}

def get_inputs():
    return [torch.randn(32, 128), torch.randn(32, 128)]

def get_init_inputs():
    return []
"""

GOOD = "torch.softmax(x, dim=-1) * 2.0 + y"


def _candidate(body: str, mutate: str = "", args: str = "x, y") -> str:
    return ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
            f"    def forward(self, {args}):\n"
            f"        out = {body}\n        {mutate or 'pass'}\n        return out\n")


class Session:
    """One warm worker, as the pairing loop keeps it, and the files it evaluates."""

    def __init__(self, tmp_path: Path, problem: str = PROBLEM.format(extra=""), **settings: Any) -> None:
        from kernelpilot.evaluation.worker.main import Worker

        self.dir = tmp_path
        self.problem = tmp_path / "p.py"
        self.problem.write_text(problem)
        self.settings: dict[str, Any] = {"trials": 4, "distributions": ["normal", "uniform"], **settings}
        self.worker = Worker("cpu")

    def evaluate(self, body: str = GOOD, mutate: str = "", args: str = "x, y", **settings: Any) -> dict[str, Any]:
        from kernelpilot.evaluation import EvalSettings

        cand = self.dir / "c.py"
        cand.write_text(_candidate(body, mutate, args))
        s = EvalSettings(device="cpu", confine=False, **{**self.settings, **settings})
        msg = {"op": "evaluate", "problem": str(self.problem), "candidate_model": str(cand),
               "candidate_dir": str(self.dir), "mode": "test", "settings": s.to_dict(), "own_kernels": [],
               "kind": "pytorch"}
        answer = self.worker.evaluate(msg)
        assert "verdict" in answer, answer
        verdict = answer["verdict"]
        assert self.worker.tidy()  # the worker's loop tidies after each answer, before the next request
        return verdict

    def cache(self) -> Any:
        (state,) = self.worker.problems.values()
        return state.references


@pytest.fixture(autouse=True)
def store_from_the_first_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests look at what is kept: entries from a problem's first verdict on (the product: its second)."""
    from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache

    monkeypatch.setattr(ReferenceCache, "STORE_FROM_VERDICT", 1)


def test_a_problem_judged_once_pays_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache

    monkeypatch.setattr(ReferenceCache, "STORE_FROM_VERDICT", 2)
    s = Session(tmp_path)
    s.evaluate()
    assert not s.cache().entries  # a suite's one candidate per problem: no second reference computation
    assert s.evaluate()["correctness"]["references_cached"] == 0 and len(s.cache().entries) == 4
    assert s.evaluate()["correctness"]["references_cached"] == 4


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    ca, cb = dict(a["correctness"]), dict(b["correctness"])
    ca.pop("references_cached"), cb.pop("references_cached")
    assert ca == cb
    assert a["status"] == b["status"]


def test_second_edit_reuses_the_references_with_the_same_verdict(tmp_path: Path) -> None:
    s = Session(tmp_path)
    first = s.evaluate()
    assert first["correctness"]["passed"] and first["correctness"]["references_cached"] == 0
    assert len(s.cache().entries) == 4 and s.cache().bytes > 0
    second = s.evaluate()
    assert second["correctness"]["references_cached"] == 4
    _same(first, second)
    assert s.evaluate()["correctness"]["references_cached"] == 4


def test_a_wrong_candidate_is_caught_from_the_cache(tmp_path: Path) -> None:
    s = Session(tmp_path)
    s.evaluate()
    wrong = s.evaluate(GOOD + " + 1e-2")
    corr = wrong["correctness"]
    assert corr["references_cached"] == 4
    assert not corr["passed"]  # (status "rejected": a PyTorch rewrite is rejected as one, and checked)
    assert not any(t["passed"] for t in corr["trials"])
    assert s.evaluate()["correctness"]["passed"]  # the wrong one left the entries as they were


def test_a_candidate_that_mutates_its_inputs_is_caught_from_the_cache(tmp_path: Path) -> None:
    s = Session(tmp_path)
    s.evaluate()
    bad = s.evaluate(mutate="x.add_(1.0)")
    corr = bad["correctness"]
    assert corr["references_cached"] == 4
    assert corr["inputs_unmodified"] is False and not corr["passed"]
    assert all(t["message"] == "the candidate modified its inputs in place" for t in corr["trials"])
    # and the inputs it mutated were not what the references were computed on: the next one passes
    assert s.evaluate()["correctness"]["passed"]


def test_new_problem_bytes_invalidate_even_with_the_same_mtime(tmp_path: Path) -> None:
    s = Session(tmp_path)
    s.evaluate()
    old = s.cache()
    mtime = s.problem.stat().st_mtime_ns
    s.problem.write_text(PROBLEM.format(extra=" + 0.5"))
    os.utime(s.problem, ns=(mtime, mtime))
    changed = s.evaluate()
    assert changed["correctness"]["references_cached"] == 0
    assert not changed["correctness"]["passed"]  # the problem now adds 0.5: the old references would have passed
    assert not old.entries and s.cache() is not old  # the old problem's entries were dropped with it


@pytest.mark.parametrize("change", [{"seed": 7}, {"tolerances": {"float32": (1e-3, 1e-3)}},
                                    {"distributions": ["uniform", "normal"]}])
def test_settings_that_change_inputs_or_tolerance_invalidate(tmp_path: Path, change: dict[str, Any]) -> None:
    s = Session(tmp_path)
    base = s.evaluate()
    changed = s.evaluate(**change)
    assert changed["correctness"]["references_cached"] == 0 and changed["correctness"]["passed"]
    assert base["correctness"]["passed"]
    assert s.evaluate(**change)["correctness"]["references_cached"] == 4


def test_more_trials_reuse_the_ones_kept(tmp_path: Path) -> None:
    s = Session(tmp_path)
    s.evaluate()
    assert s.evaluate(trials=6)["correctness"]["references_cached"] == 4


def test_budget_too_small_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.evaluation.correctness import reference_cache

    monkeypatch.setattr(reference_cache, "CPU_BYTES", 1024)  # one output is 32*128*4 = 16 KiB
    s = Session(tmp_path)
    first = s.evaluate()
    assert not s.cache().entries and s.cache().bytes == 0 and s.cache().refused > 0
    second = s.evaluate()
    assert second["correctness"]["references_cached"] == 0
    _same(first, second)


ONE = 32 * 128 * 4 + 32 * 128 * 8  # one trial's entry: the float32 output and the float64 one


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the reference computations (the dtype and float64 outputs of one trial's inputs) verify makes."""
    from kernelpilot.evaluation.correctness import verify

    calls = [0]
    real = verify.reference_outputs

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(verify, "reference_outputs", counting)
    return calls


def test_a_budget_smaller_than_the_trials_keeps_the_first_ones_for_every_edit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verification visits its trials in one order every edit: evicting the oldest entry for the newest only
    moved the miss (every trial missed, and paid its reference twice to prove the entry it then evicted)."""
    from kernelpilot.evaluation.correctness import reference_cache

    monkeypatch.setattr(reference_cache, "CPU_BYTES", 2 * ONE)
    calls = _counted(monkeypatch)
    prints = [0]
    real_print = reference_cache.fingerprint

    def counting_print(inputs: Any) -> Any:
        prints[0] += 1
        return real_print(inputs)

    monkeypatch.setattr(reference_cache, "fingerprint", counting_print)  # before the worker's integrity baseline
    s = Session(tmp_path)
    s.evaluate()
    cache = s.cache()
    assert [k[1] for k in cache.entries] == [42000, 42001] and cache.bytes <= 2 * ONE  # the first two trials
    assert cache.refused == 2  # the other two were refused before their second computation
    assert calls[0] == 2 * 2 + 2  # two proved (twice each), two computed once
    for _ in range(2):
        calls[0] = prints[0] = 0
        again = s.evaluate()
        assert again["correctness"]["references_cached"] == 2 and again["correctness"]["passed"]
        assert calls[0] == 2  # the trials that do not fit cost one computation each, as without a cache
        assert prints[0] == 2  # and no fingerprint of their inputs (a pass over every input in float64)
        assert [k[1] for k in cache.entries] == [42000, 42001]


def test_entries_of_another_context_make_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries no trial of this verification can hit (other settings) are evicted for this one's."""
    from kernelpilot.evaluation.correctness import reference_cache

    monkeypatch.setattr(reference_cache, "CPU_BYTES", 4 * ONE)
    s = Session(tmp_path)
    s.evaluate()
    old = {k[0] for k in s.cache().entries}
    looser = {"tolerances": {"float32": (1e-3, 1e-3)}}
    s.evaluate(**looser)
    cache = s.cache()
    assert len(cache.entries) == 4 and cache.bytes <= 4 * ONE
    assert not old & {k[0] for k in cache.entries}  # every entry is the new context's
    assert s.evaluate(**looser)["correctness"]["references_cached"] == 4


def test_a_budget_that_shrank_evicts_this_contexts_oldest_entries(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Less free memory than when the entries were stored (the budget is a share of it): the next verification
    gives back the least recently used ones before its first trial."""
    from kernelpilot.evaluation.correctness import reference_cache

    monkeypatch.setattr(reference_cache, "CPU_BYTES", 4 * ONE)
    s = Session(tmp_path)
    s.evaluate()
    assert len(s.cache().entries) == 4
    monkeypatch.setattr(reference_cache, "CPU_BYTES", 2 * ONE)
    again = s.evaluate()
    assert [k[1] for k in s.cache().entries] == [42002, 42003] and s.cache().bytes <= 2 * ONE
    assert again["correctness"]["references_cached"] == 2 and again["correctness"]["passed"]


def test_the_environment_variable_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELPILOT_REFERENCE_CACHE_BYTES", "0")
    s = Session(tmp_path)
    s.evaluate()
    assert s.evaluate()["correctness"]["references_cached"] == 0 and not s.cache().entries


def test_a_nondeterministic_reference_is_not_kept(tmp_path: Path) -> None:
    noisy = PROBLEM.format(extra=" + torch.rand_like(y) * 1e-3")
    s = Session(tmp_path, noisy)
    first = s.evaluate()
    assert not s.cache().entries
    note = "reference outputs are not reused between edits: two reference runs on the same inputs differed bitwise"
    assert note in first["correctness"]["notes"]
    second = s.evaluate()
    assert second["correctness"]["references_cached"] == 0 and note in second["correctness"]["notes"]


UNSEEDED = """
import numpy as np
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, idx):
        return x[idx] * 3.0

def get_inputs():
    return [torch.randn(64, 16), torch.from_numpy(np.random.permutation(64))]

def get_init_inputs():
    return []
"""


def test_inputs_not_drawn_from_the_seed_are_not_served_stale_references(tmp_path: Path) -> None:
    s = Session(tmp_path, UNSEEDED)
    assert s.evaluate("x[idx] * 3.0", args="x, idx")["correctness"]["passed"]
    assert s.cache().entries  # within one edit each trial's inputs were drawn once
    second = s.evaluate("x[idx] * 3.0", args="x, idx")
    corr = second["correctness"]
    assert corr["passed"] and corr["references_cached"] == 0  # a permutation: same sum, other positions
    assert any("get_inputs gives other values" in n for n in corr["notes"])


def test_forgetting_the_problem_releases_the_entries(tmp_path: Path) -> None:
    s = Session(tmp_path)
    s.evaluate()
    cache = s.cache()
    assert cache.entries
    s.worker.forget_problems()
    assert not cache.entries and cache.bytes == 0 and not s.worker.problems


def test_packed_entries_round_trip_every_dtype_and_shape() -> None:
    import torch

    from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache, fingerprint

    outs = (torch.randn(3, 5).t(), torch.tensor(2.5, dtype=torch.float16), torch.zeros(0, 4),
            torch.arange(7, dtype=torch.int64), torch.tensor([True, False, True]))
    out64 = [o.double() if o.is_floating_point() else o for o in outs]
    cache = ReferenceCache("cpu")
    print_ = fingerprint([torch.ones(3)])
    assert cache.store("k", print_, outs, out64)
    got_ref, got64 = cache.lookup("k", print_)
    for a, b in zip(list(outs) + out64, got_ref + got64):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert cache.lookup("k", fingerprint([torch.ones(3) * 2])) is None and cache.disabled
    # a permutation keeps the sum; the fingerprint still differs
    x = torch.arange(200, dtype=torch.float32)
    assert fingerprint([x]) != fingerprint([x.flip(0)])


COUNTED = """
import torch
import torch.nn as nn

CALLS = []
SCALE = 2.0

class Model(nn.Module):
    def forward(self, x, y):
        CALLS.append(x.dtype)
        return torch.softmax(x, dim=-1) * SCALE + y

def get_inputs():
    return [torch.randn(32, 128), torch.randn(32, 128)]

def get_init_inputs():
    return []
"""


def _module(s: Session) -> Any:
    (state,) = s.worker.problems.values()
    return state.module


def test_reference_first_trials_still_call_the_dtype_reference(tmp_path: Path) -> None:
    import torch

    s = Session(tmp_path, COUNTED)
    s.evaluate()
    calls = _module(s).CALLS
    calls.clear()
    assert s.evaluate()["correctness"]["references_cached"] == 4
    assert calls == [torch.float32, torch.float32]  # trials 2 and 4 (reference first), never the float64 copy


def test_a_reference_that_changed_between_edits_is_seen_on_reference_first(tmp_path: Path) -> None:
    s = Session(tmp_path, COUNTED)
    s.evaluate()
    _module(s).SCALE = 3.0  # hidden state the weights' fingerprint cannot see
    corr = s.evaluate()["correctness"]
    assert corr["references_cached"] == 1  # trial 1 (candidate first); trial 2's fresh call differed
    assert any("differed bitwise" in n for n in corr["notes"]) and s.cache().disabled
    assert [t["passed"] for t in corr["trials"]][1:] == [False, False, False]  # fresh references from there on


def test_the_fingerprint_is_the_same_in_chunks_and_sees_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    import math

    import torch

    from kernelpilot.evaluation.correctness import compare
    from kernelpilot.evaluation.correctness.reference_cache import fingerprint

    x = torch.randn(37, 101)  # not a multiple of 64: a tail too
    whole = fingerprint([x])
    monkeypatch.setattr(compare, "CHUNK", 256)  # bounded float64 work: many chunks
    chunked = fingerprint([x])
    assert whole[0] == chunked[0] and len(whole[1]) == len(chunked[1])
    assert all(math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9) for a, b in zip(whole[1], chunked[1]))
    swapped = x.clone().reshape(-1)
    swapped[[10, 300]] = swapped[[300, 10]]  # two values in different chunks trade places
    assert fingerprint([swapped.view(37, 101)]) != chunked


def test_only_as_many_entries_of_other_contexts_go_as_the_room_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Storing an entry evicts other contexts' entries least recently used first, and no more than it needs; a store
    that could not fit even without them evicts nothing."""
    import torch

    from kernelpilot.evaluation.correctness import reference_cache
    from kernelpilot.evaluation.correctness.reference_cache import ReferenceCache, fingerprint

    out = torch.zeros(256)  # 1 KiB: its float64 twice that
    entry = 256 * 4 + 256 * 8
    monkeypatch.setattr(reference_cache, "CPU_BYTES", 3 * entry)
    cache = ReferenceCache("cpu")
    print_ = fingerprint([out])
    for i in range(3):
        assert cache.store(("old", i), print_, out, out.double())
    assert cache.lookup(("old", 0), print_) is not None  # ("old", 1) is now the least recently used
    assert cache.store(("new", 0), print_, out, out.double())
    assert list(cache.entries) == [("old", 2), ("old", 0), ("new", 0)] and cache.bytes == 3 * entry
    big = torch.zeros(4 * 256)
    assert not cache.store(("new", 1), print_, big, big.double())  # 4 entries' worth: never fits
    assert list(cache.entries) == [("old", 2), ("old", 0), ("new", 0)] and cache.bytes == 3 * entry
