// The forward pass of every family (Llama 2/3, Mistral, Qwen2/3, SmolLM2/3, Gemma 2/3, Qwen3.5):
// embed → blocks (RMSNorm, GQA attention with RoPE — or a Gated DeltaNet layer on Qwen3.5 —
// then the MLP) → norm → logits, over a batch of tokens at consecutive positions, with an F32
// KV cache for the attention layers and a fixed-size recurrent state for the DeltaNet layers.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_impl.h"
#include "runtime/aligned.h"
#include "runtime/threadpool.h"

namespace krafla {

class Forward {
 public:
  Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch);

  // Evaluates tokens[0..n) at positions pos0..pos0+n-1 (n <= n_batch, pos0+n <= n_ctx).
  // Writes the logits of every token ([n, n_vocab]) when all_logits, else of the last one.
  void run(const int32_t* tokens, int n, int pos0, bool all_logits, float* logits);

  int n_ctx() const { return n_ctx_; }
  int n_batch() const { return n_batch_; }
  // Zeroes the DeltaNet layers' recurrent and conv state (a new sequence from position 0).
  void reset_state();

 private:
  struct MatJob {
    const Matrix* m;
    float* out;  // [n, m->rows]
  };
  // Quantizes rows [0,n) of `in` (width cols) for each weight type the jobs need, then runs
  // all jobs in one parallel region.
  void matmuls(const float* in, int64_t cols, int n, std::initializer_list<MatJob> jobs);
  void attention(int layer, int n, int pos0);
  void attention_block(int layer, int n, int pos0);  // h → tmp_
  void delta_block(int layer, int n);                // h → tmp_ (src/ops/delta.h)
  float* k_cache(int layer, int kvh) const;
  float* v_cache(int layer, int kvh) const;

  const Model::Impl& m_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  int n_ctx_, n_batch_;
  std::vector<int> kv_slot_;    // [n_layers] index into the KV cache, -1 for DeltaNet layers
  std::vector<int> lin_slot_;   // [n_layers] index into the DeltaNet state, -1 otherwise
  AlignedBuffer kv_k_, kv_v_;   // (attention layer, kv_head, ctx, head_dim)
  AlignedBuffer conv_state_;    // (DeltaNet layer, conv_k - 1, conv_dim)
  AlignedBuffer ssm_state_;     // (DeltaNet layer, v_heads, k_dim, v_dim)
  AlignedBuffer lin_qkv_, lin_conv_;  // (batch, conv_dim)
  AlignedBuffer lin_z_, lin_o_;       // (batch, v_heads*v_dim)
  AlignedBuffer lin_b_, lin_a_;       // (batch, v_heads)
  AlignedBuffer agate_;               // (batch, q_dim) attention output gate (Qwen3.5)
  AlignedBuffer rope_cos_, rope_sin_;  // (ctx, rope_dim/2)
  AlignedBuffer rope_cos_local_, rope_sin_local_;  // (ctx, rope_dim/2), Gemma 3 local layers
  AlignedBuffer x_, h_;         // (batch, dim)
  AlignedBuffer q_, k_, v_;     // (batch, q_dim | kv_dim)
  AlignedBuffer att_, tmp_;     // (batch, q_dim), (batch, dim)
  AlignedBuffer gate_, up_;     // (batch, ffn_dim)
  AlignedBuffer act_[4];        // quantized activations per weight type
  AlignedBuffer scores_;        // (threads, ctx)
};

}  // namespace krafla
