// Gated DeltaNet, the "linear attention" of Qwen3.5 / Qwen3-Next (Yang et al., "Gated Delta
// Networks", 2024): a causal depthwise convolution over the q/k/v projections, then per value
// head a fixed-size state S [k_dim, v_dim] updated token by token with the gated delta rule.
// The state replaces the KV cache: memory does not grow with the context.
#pragma once
#include <cstdint>

namespace krafla::delta {

// Causal depthwise convolution with SiLU for channels [c0, c1) of C:
//   out[t][c] = silu(sum_j wt[j][c] * x[t + j][c]),  j = 0..K-1,
// where x is the K-1 rows of `state` (the previous inputs, oldest first) followed by in[0..n).
// Afterwards `state` holds the last K-1 rows of x for those channels. wt is tap-major [K][C].
void conv_silu(const float* wt, int K, float* state, const float* in, int64_t n, int64_t C,
               int64_t c0, int64_t c1, float* out);

// x *= scale / sqrt(sum(x^2) + 1e-6) (the l2norm transformers applies to q and k, with FLA's
// epsilon).
void l2norm(float* x, int64_t n, float scale);

// The recurrence itself, one token of one head, is kernels::delta_step (kernels/kernels.h).

}  // namespace krafla::delta
