// The kernel of residual_rmsnorm_gate.cu as binding.cpp launches it (both include this declaration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// For the row r of each cluster of kCluster CTAs: h_out[r] = x[r] * scale + residual[r], out[r] = rmsnorm(h[r]) *
// weight * silu(gate[r]); n_cols a multiple of 8, at most kCluster * kThreads * kVecs vectors; pointers 16-byte
// aligned.
template <int kThreads, int kVecs, int kCluster>
__global__ void residual_rmsnorm_gate_rows(const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ residual,
                                           const __nv_bfloat16* __restrict__ gate,
                                           const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ h_out,
                                           __nv_bfloat16* __restrict__ out, int64_t n_cols, float scale, float eps);
