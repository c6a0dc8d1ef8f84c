// GQA attention with RoPE over one sequence's KV cache: the layer as a whole (AttentionBlock)
// and its inner loop for the query heads that share one KV head (attend_group).
#pragma once
#include <cstdint>
#include <vector>

#include "base/aligned.h"
#include "krafla/model.h"
#include "ops/matmul.h"
#include "state/kv_cache.h"
#include "state/sequence.h"

namespace krafla {

// Key/value rows converted per call of attend_group when the cache is not F32.
constexpr int64_t kKvRows = 32;

// For each of the `group` query heads g (q + g*head_dim, consecutive), out[g] = softmax(s_gj) ·
// V[j] for j in [0, n_keys), s_gj = scale * q_g·K[j], or softcap*tanh(s_gj/softcap) when
// softcap > 0 (Gemma 2), over the cached positions first .. first+n_keys-1 of `kv`. F16 and
// Q8_0 rows are converted to floats kKvRows at a time into `rows` (room for kKvRows*head_dim
// floats). `scores` has room for group * n_keys floats. Every query head of the group is
// served per key row, so each K/V row is read from memory once per group instead of once per
// head; a head's arithmetic (and so its result, bit for bit) is the same for any group size.
void attend_group(const float* q, int group, const KvCache::HeadView& kv, int64_t first,
                  int64_t n_keys, float scale, float softcap, float* scores, float* rows,
                  float* out);

// An attention layer's weights (docs/format.md, blk.N.attn_*).
struct AttentionWeights {
  Matrix wq;                  // (n_heads*head_dim, dim)
  Matrix wk, wv;              // (n_kv_heads*head_dim, dim)
  Matrix wo;                  // (dim, n_heads*head_dim)
  Matrix wgate;               // (n_heads*head_dim, dim) with attn_gate (Qwen3.5)
  const float* bq = nullptr;  // (n_heads*head_dim) with qkv_bias
  const float* bk = nullptr;  // (n_kv_heads*head_dim)
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // (head_dim) with qk_norm
  const float* k_norm = nullptr;
};

// The layer as a whole, with its scratch buffers for a batch of up to n_batch tokens at
// positions below n_ctx.
class AttentionBlock {
 public:
  AttentionBlock(const ModelConfig& c, int n_ctx, int n_batch, Matmuls& mm);
  // out (n, dim) = the layer on h (n, dim), row t being a token of sequence b.seg(t) at
  // position b.pos(t): the batch's keys and values are stored in each row's own KV cache
  // first, then every query attends to its sequence's cached positions up to its own.
  void run(const AttentionWeights& w, const LayerConfig& lc, int layer, const float* h,
           const BatchLayout& b, float* out);

 private:
  // cos/sin per position (ctx, rope_dim/2), rope_attn_factor applied.
  struct RopeTable {
    std::vector<float> cos, sin;
  };
  RopeTable rope_table(const std::vector<float>& freqs, int n_ctx) const;
  void project(const AttentionWeights& w, const float* h, int n);  // → q_, k_, v_, gate_
  void prepare(const AttentionWeights& w, const LayerConfig& lc, int layer,
               const BatchLayout& b);  // biases, qk-norm, RoPE; k_, v_ → each row's KV cache
  void attend(const LayerConfig& lc, int layer, const BatchLayout& b);  // → att_
  void apply_gate(int n);                                               // att_ *= sigmoid(gate_)

  const ModelConfig& c_;
  Matmuls& mm_;
  int n_ctx_;
  RopeTable rope_, rope_local_;  // rope_freqs; rope_freqs_local (Gemma 3 local layers)
  AlignedBuffer q_, att_;        // (batch, n_heads*head_dim)
  AlignedBuffer k_, v_;          // (batch, n_kv_heads*head_dim)
  AlignedBuffer gate_;           // (batch, n_heads*head_dim) with attn_gate
  AlignedBuffer scores_;         // (threads, group, ctx)
  AlignedBuffer kv_rows_;        // (threads, kKvRows, head_dim): converted F16/Q8_0 rows
  std::vector<int64_t> bounds_;  // attend(): thread i's units are [bounds_[i], bounds_[i+1])
};

}  // namespace krafla
