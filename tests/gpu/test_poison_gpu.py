"""The allocator's poisoning on a real GPU (kernelpilot/evaluation/correctness/inputs.py ``poison_allocator``):
whatever a candidate allocates after it lands on NaN, stale results of earlier calls included, and poisoning
before every trial keeps the reserved memory bounded (it no longer gives memory back on each call)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelpilot.evaluation.correctness.inputs import SMALL_POOL_NAN, poison_allocator  # noqa: E402

pytestmark = pytest.mark.gpu

SIZES = [256, 4096, 300_000, 1 << 20, 3 << 20, 40 << 20]  # bytes: small pool, its limit, large pool


def _all_nan(t: torch.Tensor) -> bool:
    return bool(torch.isnan(t.view(torch.float32)).all())


@pytest.mark.parametrize("nbytes", [SIZES[-1] * 4, 256 << 20])
def test_what_is_allocated_after_the_poison_is_nan_even_where_a_result_was(nbytes: int) -> None:
    live = torch.ones(5 << 20, device="cuda")  # a live tensor: the free blocks beside it are fragments
    stale = [torch.full((n // 4,), 7.0, device="cuda") for n in SIZES]  # results of an earlier call, then freed
    del stale
    for _ in range(3):  # and again after the poison's own blocks were freed: they are claimed and filled again
        poison_allocator(nbytes, "cuda")
        fresh = [torch.empty(n // 4, dtype=torch.float32, device="cuda") for n in SIZES]
        assert all(_all_nan(t) for t in fresh), [n for n, t in zip(SIZES, fresh, strict=True) if not _all_nan(t)]
        for t in fresh:
            t.fill_(7.0)  # this trial's outputs: stale for the next one
        del fresh
    assert bool((live == 1).all())  # the live tensor is untouched


def test_poisoning_before_every_trial_keeps_the_reserved_memory_bounded() -> None:
    x = torch.randn(1 << 24, device="cuda")
    nbytes = 4 * x.numel() * 4
    poison_allocator(nbytes, "cuda")
    first = torch.cuda.memory_reserved()
    for i in range(40):  # trials: the poison, a candidate's outputs and temporaries, the reference's
        poison_allocator(nbytes, "cuda")
        out = torch.softmax(x.view(256, -1), -1) * (i + 1)
        temps = [torch.empty((i % 7 + 1) << 18, device="cuda") for _ in range(5)]
        del out, temps
    grown = torch.cuda.memory_reserved() - first
    assert grown <= 3 * max(nbytes, SMALL_POOL_NAN) + 4 * SMALL_POOL_NAN, grown
