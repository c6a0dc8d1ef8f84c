// Gated DeltaNet, the "linear attention" of Qwen3.5 / Qwen3-Next (Yang et al., "Gated Delta
// Networks", 2024): a causal depthwise convolution over the q/k/v projections, then per value
// head a fixed-size state S [k_dim, v_dim] updated token by token with the gated delta rule.
// The state replaces the KV cache: memory does not grow with the context.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "krafla/model.h"
#include "ops/matmul.h"
#include "runtime/aligned.h"

namespace krafla::delta {

// A DeltaNet layer's weights (docs/format.md, blk.N.ssm_*).
struct Weights {
  Matrix qkv;                 // (2*k_heads*k_dim + v_heads*v_dim, dim): q, k, v before the conv
  Matrix z;                   // (v_heads*v_dim, dim): the output gate
  Matrix beta;                // (v_heads, dim): beta = sigmoid(x · beta)
  Matrix alpha;               // (v_heads, dim): decay input
  std::vector<float> conv_t;  // (conv_k, conv_dim): the conv kernel, tap-major
  const float* dt_bias = nullptr;  // (v_heads)
  const float* a = nullptr;        // (v_heads): -exp(A_log)
  const float* norm = nullptr;     // (v_dim): gated RMSNorm weight
  Matrix out;                      // (dim, v_heads*v_dim)
};

// One sequence's state of every DeltaNet layer: the conv history and the recurrent state.
class State {
 public:
  explicit State(const ModelConfig& c);
  void reset();                  // zeroes it all: a new sequence from position 0
  float* conv(int layer) const;  // (conv_k - 1, conv_dim), the oldest input row first
  float* ssm(int layer) const;   // (v_heads, k_dim, v_dim)

 private:
  std::vector<int> slot_;  // [n_layers] the layer's index below, -1 for attention layers
  size_t conv_elems_ = 0, ssm_elems_ = 0;  // per layer
  AlignedBuffer conv_;                     // (DeltaNet layer, conv_k - 1, conv_dim)
  AlignedBuffer ssm_;                      // (DeltaNet layer, v_heads, k_dim, v_dim)
};

// The layer as a whole, with its scratch buffers for a batch of up to n_batch tokens.
class Block {
 public:
  Block(const ModelConfig& c, int n_batch, Matmuls& mm);
  // A sequence's rows [row0, row0 + n) of the batch and its state.
  struct Rows {
    State* state;
    int row0, n;
  };
  // out (n, dim) = the layer on h (n, dim), advancing each sequence's state for `layer` by its
  // rows (in order; the sequences' rows are consecutive and do not overlap).
  void run(const Weights& w, int layer, const float* h, int n, std::span<const Rows> seqs,
           float* out);

 private:
  void conv(const Weights& w, int layer, std::span<const Rows> seqs);  // qkv_ → conv_
  void gates(const Weights& w, int n);                                 // q, k normed; beta, decay
  void recur(int layer, std::span<const Rows> seqs);                   // → o_
  void gated_norm(const Weights& w, int n);  // o_ *= silu(z_), per value head

  const ModelConfig& c_;
  Matmuls& mm_;
  AlignedBuffer qkv_, conv_;    // (batch, conv_dim)
  AlignedBuffer z_, o_;         // (batch, v_heads*v_dim)
  AlignedBuffer beta_, decay_;  // (batch, v_heads)
};

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
