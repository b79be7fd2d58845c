"""Guard bands on a real GPU (kernelpilot/evaluation/correctness/bounds.py): honest PyTorch and Triton calls leave
every band as it was, a Triton store past its output's end is caught and described, a call that empties the
allocator's cache is read without a fault. The corpus cases (tests/gpu/test_adversarial.py: out_of_bounds_write
and its twins) check the same through the whole evaluation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernelpilot.evaluation.correctness import bounds  # noqa: E402
from kernelpilot.evaluation.correctness.inputs import poison_allocator  # noqa: E402

pytestmark = pytest.mark.gpu


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, extra, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x + y, mask=offs < n + extra)


def _triton_add(x: torch.Tensor, y: torch.Tensor, extra: int) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add[(triton.cdiv(n + extra, 1024),)](x, y, out, n, extra, BLOCK=1024)
    return out


@pytest.mark.parametrize("n", [128, 1000, 4096 * 4096])
def test_honest_calls_leave_every_band_alone(n: int) -> None:
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    poison_allocator(64 << 20, "cuda")
    for call in (lambda: x * 0.5 + y, lambda: _triton_add(x, y, 0), lambda: torch.softmax(x.view(1, -1), -1)):
        out, overruns, error = bounds.guarded(call, "cuda")
        assert error == "" and overruns == [], [o.describe() for o in overruns]
        assert out.numel() == n


@pytest.mark.parametrize(("n", "extra"), [(128, 128), (1000, 24), (4096 * 4096, 1000)])
def test_a_store_past_the_end_is_caught(n: int, extra: int) -> None:
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    poison_allocator(max(64 << 20, 16 * n), "cuda")  # as verify poisons: four times the largest input, at least
    out, overruns, error = bounds.guarded(lambda: _triton_add(x, y, extra), "cuda")
    assert error == ""
    assert overruns, "a store past the output's end was not seen"
    first = overruns[0]
    assert first.made_in_call and first.owner_bytes == 4 * n and first.first == 0, first
    torch.testing.assert_close(out, x + y)  # the values inside are right: only the bands tell


def test_a_call_that_empties_the_cache_is_read_without_a_fault() -> None:
    x = torch.randn(1 << 20, device="cuda")

    def call() -> torch.Tensor:
        tmp = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del tmp
        torch.cuda.empty_cache()
        return x * 2

    poison_allocator(64 << 20, "cuda")
    out, overruns, error = bounds.guarded(call, "cuda")
    assert error == "" and overruns == []
    torch.testing.assert_close(out, x * 2)
