"""Helpers from torch._inductor.runtime.triton_helpers (torch 2.11.0+cu130) that the kernels call, copied verbatim."""

import math as pymath

import triton
import triton.language as tl
from triton.language import math
from triton.language.extra import libdevice


@triton.jit
def promote_to_tensor(x):
    # Addition promotes to tensor for us
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()


@triton.jit
def maximum(a, b):
    mask = a > b
    if is_floating(a):
        mask |= a != a
    return tl.where(mask, a, b)
