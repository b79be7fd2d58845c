"""output_reuse.probe on CPU tensors: a replayed result and a buffer written again are told apart by what the
call writes over the marked last output, in every dtype it can mark; storages it must not or cannot mark."""

from __future__ import annotations

import pytest
import torch

from kernelpilot.evaluation.correctness.output_reuse import poison, probe


@pytest.mark.parametrize("dtype",
                         [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64])
def test_a_rewritten_buffer_is_reuse_and_a_kept_one_replay(dtype: torch.dtype) -> None:
    x = torch.arange(12).reshape(3, 4).to(dtype)
    buf = torch.empty_like(x)

    def recompute() -> torch.Tensor:
        return torch.mul(x, 2, out=buf)

    first = recompute()
    outcome = probe(recompute, first, [x], [])
    assert outcome is not None and outcome[0] == "reuse", outcome
    assert torch.equal(buf, x * 2)  # written again after the mark
    kept = x * 3
    outcome = probe(lambda: kept, kept, [x], [])
    assert outcome is not None and outcome[0] == "replay" and "without writing it" in outcome[1]


def test_marks_no_arithmetic_makes() -> None:
    t = torch.zeros(4)
    poison(t, [])
    assert torch.isnan(t).all()
    assert torch.isnan(t * 1).all()
    assert not (torch.isnan(t * 1) & ((t * 1).view(torch.int32) == t.view(torch.int32))).any()


def test_half_written_is_a_replay_and_new_storage_is_nothing() -> None:
    x = torch.ones(8)
    buf = torch.empty(8)

    def half() -> torch.Tensor:
        buf[:4] = x[:4]
        return buf

    first = half()
    assert probe(half, first, [x], [])[0] == "replay"
    assert probe(lambda: x * 2, x * 2, [x], []) is None


def test_inputs_parameters_and_unmarkable_dtypes_are_left_alone() -> None:
    x = torch.randn(3, 4)
    assert probe(lambda: x.t(), x.t(), [x], []) is None  # a view of the input: not an output of its own
    assert torch.isfinite(x).all()
    weight = torch.nn.Parameter(torch.randn(4))
    found = probe(lambda: weight, weight, [x], [weight])  # the model's own parameter: never overwritten
    assert found is not None and found[0] == "replay" and "could not be marked" in found[1]
    assert torch.isfinite(weight).all()
    flags = torch.zeros(4, dtype=torch.bool)
    found = probe(lambda: flags, flags, [x], [])
    assert found is not None and found[0] == "replay" and not flags.any()
