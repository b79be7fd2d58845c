"""A result cache or a reused output buffer? (worker side; imports torch lazily)

A forward that hands back the storage of an output it returned before has done one of two things:

- **replayed** a result it kept (a cache): nothing was computed, the values are stale;
- **reused** its output buffer: the result was computed again into the same storage (a CUDA graph's static
  output, an ``out=`` buffer the module owns). Its timing is honest; a caller that keeps an earlier output
  sees it overwritten by the next call, so it is no drop-in replacement for a module that returns new tensors.

Storage addresses cannot tell the two apart; what is written can. Before one more call on the very same input
tensors, the last output is filled with a signalling-NaN bit pattern (floats) or the dtype's minimum (integers),
values no arithmetic produces (any operation on a signalling NaN gives a quiet one). If the call returns that
storage and any element still holds the pattern, it was not written: a replay. If every element was
overwritten: a reuse. Outputs that share storage with an input or with a tensor in ``keep`` (the model's
parameters and buffers) are never filled, nor are dtypes with no such value (bool, 8-bit, complex); a
returned storage that could not be filled is judged a replay, as before this probe existed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from kernelpilot.evaluation.correctness.compare import Outputs, flatten_outputs

if TYPE_CHECKING:
    import torch

    from kernelpilot.evaluation.correctness.inputs import Inputs

Outcome = Literal["replay", "reuse"]
_CHUNK = 1 << 26  # elements compared at a time (bounded temporary memory for outputs of many GB)


def _pattern(dtype: torch.dtype) -> tuple[torch.dtype, int] | None:
    """(the integer view dtype, the bit pattern) written into an output of ``dtype``; None: not poisoned."""
    import torch

    floats = {torch.float32: (torch.int32, 0x7FBADBAD), torch.float64: (torch.int64, 0x7FF4DBADDBADDBAD),
              torch.float16: (torch.int16, 0x7D5B), torch.bfloat16: (torch.int16, 0x7F95)}
    if dtype in floats:
        return floats[dtype]
    if dtype in (torch.int16, torch.int32, torch.int64):
        return dtype, int(torch.iinfo(dtype).min)
    return None


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _tensors(out: object) -> list[torch.Tensor]:
    import torch

    return [o for o in flatten_outputs(out) if isinstance(o, torch.Tensor) and o.numel()]


def storages(out: object) -> set[int]:
    """The storages (their data pointers) of the non-empty tensors in an output."""
    return {_storage(t) for t in _tensors(out)}


def poison(out: object, spare: Sequence[object]) -> set[int]:
    """Fill every tensor of ``out`` whose storage no tensor of ``spare`` shares with its pattern; returns the
    storages filled."""
    spared = storages(spare)
    filled: set[int] = set()
    import torch

    for o in _tensors(out):
        p = _pattern(o.dtype)
        if p is None or _storage(o) in spared or type(o) not in (torch.Tensor, torch.nn.Parameter):  # no subclass code
            continue
        o.detach().view(p[0]).fill_(p[1])
        filled.add(_storage(o))
    return filled


def _holds_pattern(o: torch.Tensor) -> bool:
    p = _pattern(o.dtype)
    if p is None:
        return False
    bits = o.detach().view(p[0])
    flat = bits.reshape(-1) if bits.is_contiguous() else bits.flatten()
    return any(bool((flat[i:i + _CHUNK] == p[1]).any()) for i in range(0, flat.numel(), _CHUNK))


def input_aliases(out: object, inputs: Inputs) -> frozenset[int]:
    """The positions (in ``flatten_outputs`` order) of the output tensors whose storage is an input's: the
    output is the input, a view of it, or was written into it."""
    import torch

    held = storages(list(inputs))
    return frozenset(i for i, o in enumerate(flatten_outputs(out))
                     if isinstance(o, torch.Tensor) and o.numel() and _storage(o) in held)


def probe(call: Callable[[], Outputs], previous: object, inputs: Inputs, keep: list[torch.Tensor]
          ) -> tuple[Outcome, str] | None:
    """Fill ``previous`` (the last output, still alive), make ``call()`` (the candidate on ``inputs``, the tensors
    that gave ``previous``) and judge what came back: None when its storage is new (or an input's), else the
    outcome and a sentence of evidence."""
    filled = poison(previous, list(inputs) + list(keep))
    again = call()
    before = storages(previous) - storages(list(inputs))
    returned = [o for o in _tensors(again) if _storage(o) in before]
    if not returned:
        return None
    if any(_storage(o) not in filled for o in returned):
        return "replay", ("a second call on the very same input tensors returned the first call's output storage "
                          "(a result cache; its dtype could not be marked to tell a rewritten buffer apart)")
    if any(_holds_pattern(o) for o in returned):
        return "replay", ("a second call on the very same input tensors returned the first call's output storage "
                          "without writing it (a result cache)")
    return "reuse", ("every call returns the same output storage, computed again into it: an output the caller "
                     "keeps is overwritten by the next call")
