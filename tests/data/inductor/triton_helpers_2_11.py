# A stand-in for torch 2.11's torch/_inductor/runtime/triton_helpers.py in the tests: the functions the
# fixtures' kernels call, with torch 2.11's signatures (online_softmax_* take 4 arguments there, 5 in 2.14),
# written for the tests. A real recording carries its torch's own file (generate.py: "runtime").
import triton
import triton.language as tl


def set_driver_to_gpu():
    pass


@triton.jit
def promote_to_tensor(x):
    # Addition promotes to tensor
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()


@triton.jit
def minimum(a, b):
    mask = a < b
    if is_floating(a):
        mask |= a != a
    return tl.where(mask, a, b)


@triton.jit
def maximum(a, b):
    mask = a > b
    if is_floating(a):
        mask |= a != a
    return tl.where(mask, a, b)


@triton.jit
def max2(a, dim):
    return tl.reduce(a, dim, maximum)


@triton.jit
def exp(x, use_fast_math: tl.constexpr):
    if use_fast_math:
        return tl.math.exp2(x * 1.4426950408889634)
    return tl.math.exp(x)


@triton.jit
def online_softmax_reduce(lhs_max, lhs_sum, dim, use_fast_math: tl.constexpr):
    out_max = max2(lhs_max, dim)
    keep = tl.expand_dims(out_max, dim)
    delta = tl.where(keep == float("-inf"), 0, lhs_max - keep)
    return out_max, tl.sum(lhs_sum * exp(delta, use_fast_math), dim)


@triton.jit
def online_softmax_combine(lhs_max, lhs_sum, rhs_max, use_fast_math: tl.constexpr):
    out_max = maximum(lhs_max, rhs_max)
    lhs_scale = tl.where(out_max == float("-inf"), 1.0, exp(lhs_max - out_max, use_fast_math))
    rhs_scale = tl.where(out_max == float("-inf"), 1.0, exp(rhs_max - out_max, use_fast_math))
    return out_max, lhs_sum * lhs_scale + rhs_scale


@triton.jit
def welford_reduce(value, mean, m2, weight, first_iteration):
    if first_iteration:
        new_weight = tl.full(weight.shape, 1, weight.dtype)
        new_mean = value
        new_m2 = tl.zeros_like(m2)
    else:
        delta = value - mean
        new_weight = weight + 1
        new_mean = mean + delta / new_weight
        new_m2 = m2 + delta * (value - new_mean)
    return new_mean, new_m2, new_weight


@triton.jit
def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@triton.jit
def welford(mean, m2, weight, dim):
    return tl.reduce((mean, m2, weight), dim, welford_combine)
