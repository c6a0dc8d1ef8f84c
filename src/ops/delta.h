// Gated DeltaNet, the "linear attention" of Qwen3.5 / Qwen3-Next (Yang et al., "Gated Delta
// Networks", 2024): a causal depthwise convolution over the q/k/v projections, then per value
// head a fixed-size state S [k_dim, v_dim] updated token by token with the gated delta rule.
// The state replaces the KV cache: memory does not grow with the context.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned.h"
#include "krafla/model.h"
#include "ops/matmul.h"
#include "state/delta_state.h"

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

// One value head of one sequence over n consecutive tokens: where the gated delta rule reads its
// inputs and writes its outputs (token t's row of each at t times its stride).
struct HeadRun {
  const float* q;      // (n, dk): l2-normalised, times dk^-1/2
  const float* k;      // (n, dk): l2-normalised
  const float* v;      // (n, dv)
  int64_t ld_in;       // the stride of q, k and v
  const float* decay;  // (n): exp(g)
  const float* beta;   // (n)
  int64_t ld_gate;     // the stride of decay and beta
  float* out;          // (n, dv)
  int64_t ld_out;
  int64_t n;
};

// The rule token by token with kernels::delta_step on S (k_dim, v_dim): decode and short runs.
void recurrent(float* S, const HeadRun& r, int64_t dk, int64_t dv);

// The same rule in chunks of up to `chunk` tokens (the WY representation of Yang et al.'s Gated
// DeltaNet, FLA's chunk_gated_delta_rule): within a chunk the tokens' corrections solve one
// unit lower-triangular system, and the state is read and written once per chunk; the products
// go through the kernels' F32 matmul. The same results as recurrent() up to float rounding (not
// bitwise). One object per thread: it holds that thread's scratch (about 280 KiB for 128 x 128
// heads at chunk 32).
// Block uses it only when asked (SessionOptions::delta_chunk): on Zen 5 (avx512vnni, 128 x 128
// heads) it takes 1.6 us per token and head against delta_step's 1.5 (0.9x at chunk 32; 0.75x
// at 64, 0.55x at 128). Packing each chunk's operands for the matmul costs as much as the
// products, and the fused delta_step already does the same three dk x dv products per token
// with the state in L1. It also ends prefill's bitwise independence of the batch size (e2e
// batch.qwen35): where the chunks start depends on how the prompt is split into steps.
class Chunked {
 public:
  static constexpr int64_t kDefaultChunk = 32;
  Chunked(int64_t dk, int64_t dv, int64_t chunk = kDefaultChunk);
  void run(float* S, const HeadRun& r);

 private:
  void chunk(const HeadRun& r, int64_t t0, int64_t c);
  int64_t dk_, dv_, chunk_;
  AlignedBuffer buf_;
  float* kq_;        // (2c, dk): the chunk's k rows, then its q rows
  float* gram_;      // (2c, c): k_t . k_s, then q_t . k_s
  float* gam_;       // (c, c): prod of decay over (s, t], s <= t
  float* t_;         // (c, c): (I + L)^-1
  float* aq_;        // (c, c): the masked, decayed q_t . k_s
  float* ks0_;       // (dv, c): (S0^T k_s)
  float* qs0_;       // (dv, c): (S0^T q_t)
  float* e_;         // (dv, c): the right-hand side, later the intra-chunk output
  float* d_;         // (dv, c): the corrections D^T
  float* kt_;        // (dk, c): k_s decayed to the chunk's end, transposed
  float* z_;         // (dv, dk): the state's increment, transposed
  float* st_;        // (dv, dk): the state transposed while the chunks run
  float* vec_;       // (2, c): gamma_t, beta_t
  uint8_t* packed_;  // the packed operand of the current matmul
};

// The layer as a whole, with its scratch buffers for a batch of up to n_batch tokens.
class Block {
 public:
  // chunk > 0: a sequence's run of at least `chunk` rows goes through Chunked in chunks of
  // that size (SessionOptions::delta_chunk); 0: every run token by token.
  Block(const ModelConfig& c, int n_batch, Matmuls& mm, int chunk = 0);
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
  int chunk_;
  std::vector<Chunked> chunked_;  // one per thread when chunk_ > 0
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

}  // namespace krafla::delta
